import { setTimeout as sleep } from 'node:timers/promises';
import { createHash, randomBytes } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  recordSecret,
  signIn,
  storedEvents,
  subscribe,
  waitFor,
  type Edge,
  type Session,
  type Stack,
  cleanupDocker,
  docker,
  standinVariant,
  testNetwork,
} from '@agenthost/testkit';
import { hostSwap } from '@agenthost/shared';
import { sleepStack, statusOf } from './sleep-stack.ts';

// Idle sleep and wake in both depths, end to end: the stand-in agent (one that reloads its keys) behind the real
// edge (Caddy and its route keeper), the provisioner on the real engine. Pro instances sleep lightly (frozen) after
// IDLE seconds without traffic and deeply (stopped) after DEEP; enterprise never does. The reconciler is held back
// (RECONCILE_INTERVAL_SECONDS) so that a wake, not a pass, meets the agent a test broke.
// Ports of this suite: instances 18716-18719, the edge 18749 (HTTPS) and 18715 (HTTP).
const HTTPS = 18749;
const HTTP = 18715;
const IDLE = 4;
const DEEP = 14;
/** Below the stand-in's own footprint, so that a light sleep really pushes some of it out. */
const RESIDENT_MB = 16;
/** The tiers' memory limit in these suites (provisionerEnv, packages/testkit). */
const TIER_MB = 256;
const VARIANT = 't-sleep-reload';
const network = testNetwork('sleep');
const sha = (v: string) => createHash('sha256').update(v).digest('hex');
/** The depth a light sleep reaches on this host: its memory goes out only to a swap that keeps it off plain disk. */
const LIGHT = hostSwap().usable ? 'swapped' : 'frozen';

let stack: Stack;
let edge: Edge;
let nc: NatsConnection;
let owner: Session;
let big: Session;
let sleeper: { id: string; url: string; token: string };
let awake: { id: string; url: string };
let boots = 0;
let pid = 0;

/** The owner's requests carry the instance's token: only they wake it and keep it awake (strangers.test.ts). */
const owns = () => ({ authorization: `Bearer ${sleeper.token}` });
const statusNow = async (s: Session, id: string) => (await statusOf(s, id)).status;
const container = () => `agenthost-${sleeper.id}`;
const inspect = async (format: string) => (await docker('inspect', '-f', format, container())).trim();

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
  await waitFor(`${id} running`, async () => (await statusNow(s, id)) === 'running', 60_000, 250);
  return { id, url: c.body.url as string, token: c.body.access_token as string };
}

/** Asleep at this depth: its status says so (the edges hear it first) and, for a light sleep, its container is frozen. */
async function asleep(depth: string) {
  await waitFor(
    `asleep (${depth})`,
    async () => {
      const v = await statusOf(owner, sleeper.id);
      if (v.status !== 'sleeping' || v.sleep_depth !== depth) return false;
      return depth === 'stopped' || (await inspect('{{.State.Paused}}')) === 'true';
    },
    60_000,
    250,
  );
}

beforeAll(async () => {
  await cleanupDocker(network);
  // The stand-in reloads on POST /reload; the image says so, as the OpenClaw image names its secrets.reload.
  await standinVariant(VARIANT, { AGENTHOST_RELOAD_URL: 'http://127.0.0.1:18789/reload' });
  ({ stack, edge } = await sleepStack({
    network,
    ports: [18716, 18719],
    edgePorts: { https: HTTPS, http: HTTP },
    idle: { free: IDLE, pro: IDLE, enterprise: 0 },
    deep: { pro: DEEP },
    provisioner: { DEFAULT_VERSION: VARIANT, SLEEP_RESIDENT_MB: String(RESIDENT_MB), RECONCILE_INTERVAL_SECONDS: '3600' },
    edge: { EDGE_WAKE_TIMEOUT_SECONDS: '45' },
  }));
  nc = await stack.nats.connect();
  [owner, big] = await Promise.all([signIn(stack.api), signIn(stack.api)]);
  await subscribe(stack, owner, { tier: 'pro' });
  await subscribe(stack, big, { tier: 'enterprise' });
  [sleeper, awake] = await Promise.all([createRunning(owner, 'sleepy'), createRunning(big, 'never-sleeps')]);
}, 240_000);

afterAll(async () => {
  await nc?.drain();
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
    // On a busy machine it may have slept (and this woke it) before the suite got here: its boots and process now.
    boots = (reached.json.state as { boots: number }).boots;
    pid = reached.json.pid as number;
    // Requests for twice the idle time, one a second.
    for (let i = 0; i < IDLE * 2; i++) {
      expect((await edge.request(`${sleeper.url}/`, { headers: owns() })).status).toBe(200);
      await sleep(1000);
    }
    expect(await statusNow(owner, sleeper.id)).toBe('running');
    // A WebSocket asks its route once; its open connection is what keeps the instance awake.
    const ws = await edge.websocket(`${sleeper.url}/ws`, owns());
    expect(JSON.parse(await ws.receive())).toEqual({ hello: sleeper.id });
    await sleep((IDLE * 2 + 1) * 1000);
    expect(await statusNow(owner, sleeper.id)).toBe('running');
    ws.send('still awake');
    expect(await ws.receive()).toBe('still awake');
    ws.close();
  });

  it(`puts an idle instance to sleep lightly: its processes frozen, its memory out to swap (${LIGHT} here), and not counted as CPU or memory`, async () => {
    await asleep(LIGHT);
    expect(await inspect('{{.State.Running}} {{.State.Paused}}')).toBe('true true');
    if (LIGHT === 'swapped') {
      // Held on the host: what the frozen container keeps resident, at most the resident size (its memory goes out
      // in steps once it is frozen).
      const [used, limit] = await waitFor(
        'its memory out to swap',
        async () => {
          const u = (await docker('stats', '--no-stream', '--format', '{{.MemUsage}}', container())).split('/').map((v) => Number.parseFloat(v));
          return u[1] === RESIDENT_MB && u;
        },
        30_000,
        250,
      );
      expect(limit).toBe(RESIDENT_MB);
      expect(used).toBeLessThanOrEqual(RESIDENT_MB);
    }
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
    const listed = (await owner.api.get('/instance/list')).body.instances.find((i: { instance_id: string }) => i.instance_id === sleeper.id);
    expect(listed).toMatchObject({ status: 'sleeping', sleep_depth: LIGHT });
  });

  it('never puts to sleep an instance of a tier that does not sleep', async () => {
    // Created with the pro one and never reached: idle as long, still running.
    expect(await statusNow(big, awake.id)).toBe('running');
  });

  it('resumes the same agent on the first request, with its memory and token, and a key stored while it slept loaded', async () => {
    await asleep(LIGHT);
    const key = `sk-${randomBytes(12).toString('hex')}`;
    recordSecret(key);
    // Stored while it sleeps: the answer says it loads at the wake (it does not wait for a frozen agent).
    const stored = await owner.api.post('/keys/store', { instance_id: sleeper.id, keys: { OPENAI_API_KEY: key } });
    expect(stored.status, stored.text).toBe(200);
    expect(stored.body).toMatchObject({ applied: false, reason: 'the instance is asleep: it loads its keys when it wakes' });
    // One request, held by the edge while the agent resumes: answered by the same process, not a new boot.
    const first = await edge.request(`${sleeper.url}/`, { headers: owns() });
    expect(first.status, first.text).toBe(200);
    expect(first.json).toMatchObject({ agent: 'standin', instance_id: sleeper.id, pid, state: { boots } });
    expect(await statusNow(owner, sleeper.id)).toBe('running');
    expect(await inspect('{{.State.Paused}} {{.HostConfig.Memory}} {{.HostConfig.MemorySwap}}')).toBe(`false ${TIER_MB * 1024 ** 2} ${TIER_MB * 1024 ** 2}`);
    // Its bootstrap's key watch stayed open through the sleep: the change it held is read and the agent reloads.
    const keys = await waitFor(
      'the key in the resumed agent',
      async () => {
        const r = await edge.request(`${sleeper.url}/keys`, { headers: owns() });
        return (r.json.names as string[] | undefined)?.includes('OPENAI_API_KEY') ? r : undefined;
      },
      15_000,
      250,
    );
    expect((keys.json.sha256 as Record<string, string>).OPENAI_API_KEY).toBe(sha(key));
  });

  it('lets a WebSocket client reconnecting to a sleeping instance through', async () => {
    await asleep(LIGHT);
    const ws = await edge.websocket(`${sleeper.url}/ws`, owns());
    expect(JSON.parse(await ws.receive())).toEqual({ hello: sleeper.id });
    ws.send('after the wake');
    expect(await ws.receive()).toBe('after the wake');
    ws.close();
  });

  it('sleeps deeply after the deep time (its container stopped), and the next request boots it with its data', async () => {
    await asleep('stopped');
    expect(await inspect('{{.State.Running}}')).toBe('false');
    const first = await edge.request(`${sleeper.url}/`, { headers: owns() });
    expect(first.status, first.text).toBe(200);
    // Its volume is the same: the agent's state file counts this as one more boot.
    expect((first.json.state as { boots: number }).boots).toBe(boots + 1);
    boots += 1;
    pid = first.json.pid as number;
  });

  it('boots an agent that cannot be resumed, and its status event says why', async () => {
    await asleep(LIGHT);
    // Its frozen container ended behind the provisioner's back (the reconciler is not due): the wake meets it.
    await docker('stop', container());
    const first = await edge.request(`${sleeper.url}/`, { headers: owns() });
    expect(first.status, first.text).toBe(200);
    expect((first.json.state as { boots: number }).boots).toBe(boots + 1);
    const events = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).map((e) => e.data);
    const warned = events.filter((e) => e.instance_id === sleeper.id && e.wake_warning);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ status: 'provisioning', wake_warning: expect.stringMatching(/could not be resumed .*it boots instead/) });
    expect(events.some((e) => e.instance_id === sleeper.id && e.status === 'sleeping' && e.sleep_depth === LIGHT)).toBe(true);
  });

  it('answers start and stop on a sleeping instance as on a stopped one', async () => {
    await asleep(LIGHT);
    expect((await owner.api.post(`/instance/stop/${sleeper.id}`)).status).toBe(200);
    expect(await statusOf(owner, sleeper.id)).toMatchObject({ status: 'stopped' });
    expect((await statusOf(owner, sleeper.id)).sleep_depth).toBeUndefined();
    // Stopped by its owner, it stays stopped: a request gets the stopped answer, it does not wake it.
    const r = await edge.request(`${sleeper.url}/`, { headers: owns() });
    expect(r.json).toMatchObject({ code: 'INSTANCE_STOPPED', status: 503 });
    expect((await owner.api.post(`/instance/start/${sleeper.id}`)).status).toBe(200);
    await waitFor('running', async () => (await statusNow(owner, sleeper.id)) === 'running', 60_000, 250);
  });
});
