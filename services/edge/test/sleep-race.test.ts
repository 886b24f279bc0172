import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordSecret, signIn, subscribe, waitFor, type Edge, type Session, type Stack, cleanupDocker, docker, testNetwork } from '@agenthost/testkit';
import { sleepStack, statusOf } from './sleep-stack.ts';

// The owner's traffic that reaches the agent just as it falls asleep lightly: the provisioner found it idle before
// it knew of that traffic, and the edge sent it on before it heard, so nothing holds it for a wake and it would wait
// inside the frozen agent until the next one. The provisioner pauses (FAULT_PAUSE_AT=sleeping) once it has decided,
// with the row still running; a slow request goes through the edge meanwhile; then the agent is frozen while it
// answers. (Bytes the agent has not read yet when it is frozen are seen by the provisioner itself: sleep.ts.)
// Ports of this suite: instances 18751-18753, the edge 18754 (HTTPS) and 18755 (HTTP).
const IDLE = 6;
const network = testNetwork('sleep-race');

let stack: Stack;
let edge: Edge;
let owner: Session;

const provisioner = () => stack.services.get('provisioner')!;

beforeAll(async () => {
  await cleanupDocker(network);
  ({ stack, edge } = await sleepStack({
    network,
    ports: [18751, 18753],
    edgePorts: { https: 18754, http: 18755 },
    idle: { pro: IDLE },
    provisioner: { FAULT_PAUSE_AT: 'sleeping' },
    edge: { EDGE_RESYNC_SECONDS: '3600' },
  }));
  owner = await signIn(stack.api);
  await subscribe(stack, owner, { tier: 'pro' });
}, 240_000);

afterAll(async () => {
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
});

describe('an instance that falls asleep under its owner’s traffic', () => {
  it('is woken again by the edge, and the request it was answering as it fell asleep is answered', async () => {
    const c = await owner.api.post('/instance/create', { framework: 'openclaw', name: 'race-light' });
    expect(c.status, c.text).toBe(200);
    recordSecret(c.body.access_token);
    const id = c.body.instance_id as string;
    const owns = { authorization: `Bearer ${c.body.access_token as string}` };
    await waitFor(`${id} running`, async () => (await statusOf(owner, id)).status === 'running', 60_000, 250);
    await waitFor('the instance through the edge', async () => (await edge.request(`${c.body.url}/`, { headers: owns })).status === 200, 30_000, 250);
    // Idle: the provisioner has decided to put it to sleep and waits there, the row still running.
    await waitFor(
      'the sleep paused after its decision',
      async () =>
        provisioner()
          .lines()
          .some((l) => l.includes('"fault_pause"')),
      60_000,
      50,
    );
    expect((await statusOf(owner, id)).status).toBe('running');
    // A request the agent takes a while to answer: it has read it when the sleep goes on and freezes it.
    const slow = edge.request(`${c.body.url}/slow?ms=3000`, { headers: owns, timeoutMs: 40_000 });
    await waitFor('the request at the agent', async () => (await docker('logs', `agenthost-${id}`)).includes('slow request'), 10_000, 50);
    process.kill(provisioner().pid()!, 'SIGUSR2');
    const answer = await slow;
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json).toMatchObject({ ok: true, slow_ms: 3000 });
    // Frozen under it, then woken by the edge that had sent it on.
    expect(
      provisioner()
        .lines()
        .some((l) => l.includes(id) && l.includes('idle instance put to sleep')),
    ).toBe(true);
    expect(edge.keeper.lines().some((l) => l.includes(id) && l.includes('fell asleep under its owner'))).toBe(true);
    await waitFor('running again', async () => (await statusOf(owner, id)).status === 'running', 30_000, 250);
  });
});
