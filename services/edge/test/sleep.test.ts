import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordSecret, signIn, subscribe, waitFor, type Edge, type Session, type Stack } from '@agenthost/testkit';
import { cleanupDocker, docker, testNetwork } from '../../provisioner/test/helpers.ts';
import { sleepStack } from './sleep-stack.ts';

// Idle sleep and wake, end to end: the stand-in agent behind the real edge (Caddy and its route keeper), the
// provisioner on the real engine. Pro instances sleep after IDLE seconds without traffic here; enterprise never does.
// Ports of this suite: instances 18716-18719, the edge 18749 (HTTPS) and 18715 (HTTP).
const HTTPS = 18749;
const HTTP = 18715;
const IDLE = 4;
const network = testNetwork('sleep');
const sha = (v: string) => createHash('sha256').update(v).digest('hex');
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

let stack: Stack;
let edge: Edge;
let owner: Session;
let big: Session;
let sleeper: { id: string; url: string; token: string };
let awake: { id: string; url: string };
let boots = 0;

/** The owner's requests carry the instance's token: only they wake it and keep it awake (strangers.test.ts). */
const owns = () => ({ authorization: `Bearer ${sleeper.token}` });
const statusOf = async (s: Session, id: string) => (await s.api.get(`/instance/status/${id}`)).body.status as string;

async function createRunning(s: Session, name: string) {
  const c = await waitFor(
    `create ${name}`,
    async () => {
      const r = await s.api.post('/instance/create', { framework: 'openclaw', name });
      return r.status !== 503 && r;
    },
    60_000,
    1000,
  );
  expect(c.status, c.text).toBe(200);
  recordSecret(c.body.access_token);
  const id = c.body.instance_id as string;
  await waitFor(`${id} running`, async () => (await statusOf(s, id)) === 'running', 60_000, 250);
  return { id, url: c.body.url as string, token: c.body.access_token as string };
}

beforeAll(async () => {
  await cleanupDocker(network);
  ({ stack, edge } = await sleepStack({
    network,
    ports: [18716, 18719],
    edgePorts: { https: HTTPS, http: HTTP },
    idle: { free: IDLE, pro: IDLE, enterprise: 0 },
    edge: { EDGE_WAKE_TIMEOUT_SECONDS: '45' },
  }));
  [owner, big] = await Promise.all([signIn(stack.api), signIn(stack.api)]);
  await subscribe(stack, owner, { tier: 'pro' });
  await subscribe(stack, big, { tier: 'enterprise' });
  [sleeper, awake] = await Promise.all([createRunning(owner, 'sleepy'), createRunning(big, 'never-sleeps')]);
}, 240_000);

afterAll(async () => {
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
});

describe('idle sleep', () => {
  it('keeps an instance awake while requests come or a WebSocket is open', async () => {
    const reached = await waitFor(
      'the instance through the edge',
      async () => {
        const r = await edge.request(`${sleeper.url}/`, { headers: owns() });
        return r.status === 200 && r;
      },
      30_000,
      250,
    );
    // On a busy machine it may have slept (and this woke it) before the suite got here: its boots so far.
    boots = (reached.json.state as { boots: number }).boots;
    // Requests for twice the idle time, one a second.
    for (let i = 0; i < IDLE * 2; i++) {
      expect((await edge.request(`${sleeper.url}/`, { headers: owns() })).status).toBe(200);
      await pause(1000);
    }
    expect(await statusOf(owner, sleeper.id)).toBe('running');
    // A WebSocket asks its route once; its open connection is what keeps the instance awake.
    const ws = await edge.websocket(`${sleeper.url}/ws`, owns());
    expect(JSON.parse(await ws.receive())).toEqual({ hello: sleeper.id });
    await pause((IDLE * 2 + 1) * 1000);
    expect(await statusOf(owner, sleeper.id)).toBe('running');
    ws.send('still awake');
    expect(await ws.receive()).toBe('still awake');
    ws.close();
  });

  it('puts an idle instance to sleep: its container stops, and it counts as an instance but not as CPU or memory', async () => {
    await waitFor('sleeping', async () => (await statusOf(owner, sleeper.id)) === 'sleeping', 45_000, 250);
    expect((await docker('inspect', '-f', '{{.State.Running}}', `agenthost-${sleeper.id}`)).trim()).toBe('false');
    const metrics = await waitFor(
      'usage without the sleeping agent',
      async () => {
        const m = (await owner.api.get('/usage/metrics')).body;
        return m.instances.memory_usage_mb === 0 && m;
      },
      20_000,
      500,
    );
    expect(metrics.instances).toMatchObject({ active: 1, cpu_usage_percent: 0, memory_usage_mb: 0 });
    expect((await owner.api.get('/subscription/status')).body.instances_used).toBe(1);
    // Listed with its status; the edge answers nothing else for it until a request comes.
    const listed = (await owner.api.get('/instance/list')).body.instances.find((i: { instance_id: string }) => i.instance_id === sleeper.id);
    expect(listed.status).toBe('sleeping');
  });

  it('never puts to sleep an instance of a tier that does not sleep', async () => {
    // Created with the pro one and never reached: idle as long, still running.
    expect(await statusOf(big, awake.id)).toBe('running');
  });

  it('wakes on the first request, which is answered, with its data, keys and access token kept', async () => {
    expect(await statusOf(owner, sleeper.id)).toBe('sleeping');
    const key = `sk-${randomBytes(12).toString('hex')}`;
    recordSecret(key);
    expect((await owner.api.post('/keys/store', { instance_id: sleeper.id, keys: { OPENAI_API_KEY: key } })).status).toBe(200);
    // One request, held by the edge while the instance wakes: answered by the agent, not with an error.
    const first = await edge.request(`${sleeper.url}/`, { headers: owns() });
    expect(first.status, first.text).toBe(200);
    expect(first.json).toMatchObject({ agent: 'standin', instance_id: sleeper.id });
    // Its volume is the same: the agent's state file counts this as one more boot.
    expect((first.json.state as { boots: number }).boots).toBe(boots + 1);
    expect(await statusOf(owner, sleeper.id)).toBe('running');
    // The stand-in gets its keys in its environment from the keys server right after it starts.
    const env = await waitFor(
      'the key in the woken agent',
      async () => {
        const r = await edge.request(`${sleeper.url}/env`, { headers: owns() });
        return (r.json.names as string[] | undefined)?.includes('OPENAI_API_KEY') ? r : undefined;
      },
      15_000,
      250,
    );
    expect((env.json.sha256 as Record<string, string>).OPENAI_API_KEY).toBe(sha(key));
    expect((env.json.sha256 as Record<string, string>).OPENCLAW_GATEWAY_TOKEN).toBe(sha(sleeper.token));
  });

  it('lets a WebSocket client reconnecting to a sleeping instance through', async () => {
    await waitFor('sleeping again', async () => (await statusOf(owner, sleeper.id)) === 'sleeping', 45_000, 250);
    const ws = await edge.websocket(`${sleeper.url}/ws`, owns());
    expect(JSON.parse(await ws.receive())).toEqual({ hello: sleeper.id });
    ws.send('after the wake');
    expect(await ws.receive()).toBe('after the wake');
    ws.close();
  });

  it('answers start and stop on a sleeping instance as on a stopped one', async () => {
    await waitFor('sleeping again', async () => (await statusOf(owner, sleeper.id)) === 'sleeping', 45_000, 250);
    expect((await owner.api.post(`/instance/stop/${sleeper.id}`)).status).toBe(200);
    expect(await statusOf(owner, sleeper.id)).toBe('stopped');
    // Stopped by its owner, it stays stopped: a request gets the stopped answer, it does not wake it.
    const r = await edge.request(`${sleeper.url}/`, { headers: owns() });
    expect(r.json).toMatchObject({ code: 'INSTANCE_STOPPED', status: 503 });
    expect((await owner.api.post(`/instance/start/${sleeper.id}`)).status).toBe(200);
    await waitFor('running', async () => (await statusOf(owner, sleeper.id)) === 'running', 60_000, 250);
  });
});
