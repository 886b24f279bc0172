import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordSecret, signIn, subscribe, waitFor, type Edge, type Session, type Stack, cleanupDocker, docker, testNetwork } from '@agenthost/testkit';
import { sleepStack } from './sleep-stack.ts';

// A request that reaches the edge while its route is older than the instance: the idle sleep stopped the container
// and the edge has not heard yet. The provisioner pauses (FAULT_PAUSE_AT=slept) right after the stop, before the row
// says sleeping, so no event is on its way and the edge's table still says running; the edge's full reads are too
// rare to catch up within the test. Ports of this suite: instances 18720-18722, the edge 18747 (HTTPS) and 18745.
const HTTPS = 18747;
const HTTP = 18745;
// The idle time counts from the container's start, which took over 3 s on a busy machine: long enough to reach the
// agent through the edge before it sleeps.
const IDLE = 10;
const network = testNetwork('wake-race');

let stack: Stack;
let edge: Edge;
let owner: Session;

const provisioner = () => stack.services.get('provisioner')!;
const statusOf = async (id: string) => (await owner.api.get(`/instance/status/${id}`)).body.status as string;
const logged = (lines: string[], ...parts: string[]) => lines.some((l) => parts.every((p) => l.includes(p)));

beforeAll(async () => {
  await cleanupDocker(network);
  ({ stack, edge } = await sleepStack({
    network,
    ports: [18720, 18722],
    edgePorts: { https: HTTPS, http: HTTP },
    // The deep sleep (its container stopped): the race is with a stop. A light sleep's is in sleep.test.ts.
    idle: {},
    deep: { pro: IDLE },
    provisioner: { FAULT_PAUSE_AT: 'slept' },
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

async function sleepingInstance(name: string, pauses: number) {
  const c = await owner.api.post('/instance/create', { framework: 'openclaw', name });
  expect(c.status, c.text).toBe(200);
  recordSecret(c.body.access_token);
  const id = c.body.instance_id as string;
  // The owner's requests (its token): only the owner's wake an instance and count as its traffic.
  const owns = { authorization: `Bearer ${c.body.access_token as string}` };
  await waitFor(`${id} running`, async () => (await statusOf(id)) === 'running', 60_000, 250);
  await waitFor('the instance through the edge', async () => (await edge.request(`${c.body.url}/`, { headers: owns })).status === 200, 30_000, 250);
  // Idle, its container is stopped; the sleep waits there with the row still running.
  const paused = () =>
    provisioner()
      .lines()
      .filter((l) => l.includes('"fault_pause"')).length;
  await waitFor('the sleep paused after the stop', async () => paused() === pauses, 60_000, 50);
  expect((await docker('inspect', '-f', '{{.State.Running}}', `agenthost-${id}`)).trim()).toBe('false');
  expect(await statusOf(id)).toBe('running');
  return { id, url: c.body.url as string, owns };
}

/** Lets the paused sleep go on once the edge has read the route again (which only the failed connection makes it do). */
async function resumeOnceReread(id: string) {
  await waitFor('the edge reads the route again', async () => logged(edge.keeper.lines(), id, '"status":"sleeping"', 'edge route'), 30_000, 25);
  process.kill(provisioner().pid()!, 'SIGUSR2');
}

describe('a route older than the instance', () => {
  it('holds a request to an agent just stopped for sleep, wakes it, and answers from it', async () => {
    const s = await sleepingInstance('race-http', 1);
    const [answer] = await Promise.all([edge.request(`${s.url}/`, { headers: s.owns }), resumeOnceReread(s.id)]);
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json).toMatchObject({ agent: 'standin', instance_id: s.id });
    expect(await statusOf(s.id)).toBe('running');
    expect(logged(provisioner().lines(), s.id, 'instance woken by a request')).toBe(true);
    // Gone before it idles again, so the next sleep that pauses is the next test's.
    expect((await owner.api.del(`/instance/delete/${s.id}`)).status).toBe(200);
  });

  it('lets a WebSocket opened then through, to the woken agent', async () => {
    const s = await sleepingInstance('race-ws', 2);
    const [ws] = await Promise.all([edge.websocket(`${s.url}/ws`, s.owns), resumeOnceReread(s.id)]);
    expect(JSON.parse(await ws.receive())).toEqual({ hello: s.id });
    ws.send('after the wake');
    expect(await ws.receive()).toBe('after the wake');
    ws.close();
  });
});
