import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkpointHost,
  cleanupDocker,
  docker,
  recordSecret,
  signIn,
  standinVariant,
  storedEvents,
  subscribe,
  testNetwork,
  waitFor,
  type Edge,
  type Session,
  type Stack,
} from '@agenthost/testkit';
import { heldMb, killPageServerAfterRestore, processes } from './checkpoint-probes.ts';
import { sleepStack, statusOf } from './sleep-stack.ts';

// The checkpointed deep sleep, end to end (docs/decisions/0049-...): the stand-in agent behind the real edge, the
// provisioner on the real engine with CRIU (deploy/criu/build.sh; deploy/install.sh builds it for the tests). After
// DEEP idle seconds a pro agent's processes are dumped to an image sealed to its instance, container and checkpoint,
// its container runs on with hold-init alone, and the next request restores the same processes.
// Ports of this suite: instances 18930-18934, the edge 18936 (HTTPS) and 18937 (HTTP).
const DEEP = 6;
const VARIANT = 't-sleep-ckpt';
const network = testNetwork('sleep-ckpt');
const checkpointDir = mkdtempSync(join(tmpdir(), 'agenthost-ckpt-'));
const sha = (v: string) => createHash('sha256').update(v).digest('hex');
const checkpointKey = randomBytes(32).toString('base64');
// Whether this host's kernel lets CRIU dump at all (checkpoint.sh check); where it does not, the suite asserts the
// provisioner's fallback instead (the deep sleep stops the agent), and says so.
const host = await checkpointHost();

type Agent = { id: string; url: string; token: string };
let stack: Stack;
let edge: Edge;
let nc: NatsConnection;
let alice: Session;
let bob: Session;
let a: Agent;
let b: Agent;

const owns = (x: Agent) => ({ authorization: `Bearer ${x.token}` });
const inspect = async (x: Agent, format: string) => (await docker('inspect', '-f', format, `agenthost-${x.id}`)).trim();
/** Where the provisioner keeps an instance's sealed image: <CHECKPOINT_DIR>/<scope>/<instance>. */
const imageDir = (x: Agent) => join(checkpointDir, network, x.id);
async function createRunning(s: Session, name: string): Promise<Agent> {
  const c = await s.api.post('/instance/create', { framework: 'openclaw', name });
  expect(c.status, c.text).toBe(200);
  recordSecret(c.body.access_token);
  const id = c.body.instance_id as string;
  await waitFor(`${id} running`, async () => (await statusOf(s, id)).status === 'running', 60_000, 250);
  return { id, url: c.body.url as string, token: c.body.access_token as string };
}

/** Asleep checkpointed: its status says so (the edges hear it before the dump), its image is whole, hold-init alone runs. */
async function checkpointed(s: Session, x: Agent) {
  await waitFor(
    'checkpointed',
    async () => {
      const v = await statusOf(s, x.id);
      return (
        v.status === 'sleeping' && v.sleep_depth === 'checkpointed' && existsSync(imageDir(x)) && (await processes(`agenthost-${x.id}`)).join() === 'hold-init'
      );
    },
    90_000,
    250,
  );
}

async function call(x: Agent, path = '/') {
  const r = await edge.request(`${x.url}${path}`, { headers: owns(x) });
  expect(r.status, r.text).toBe(200);
  return r.json as Record<string, unknown> & { pid: number; state: { boots: number; born: string } };
}

beforeAll(async () => {
  recordSecret(checkpointKey);
  await cleanupDocker(network);
  await standinVariant(VARIANT, { AGENTHOST_RELOAD_URL: 'http://127.0.0.1:18789/reload' });
  ({ stack, edge } = await sleepStack({
    network,
    ports: [18930, 18934],
    edgePorts: { https: 18936, http: 18937 },
    idle: {},
    deep: { pro: DEEP },
    provisioner: {
      DEFAULT_VERSION: VARIANT,
      CHECKPOINT_KEY: checkpointKey,
      CHECKPOINT_DIR: checkpointDir,
      RECONCILE_INTERVAL_SECONDS: '3600',
    },
    edge: { EDGE_WAKE_TIMEOUT_SECONDS: '60' },
  }));
  nc = await stack.nats.connect();
  [alice, bob] = await Promise.all([signIn(stack.api), signIn(stack.api)]);
  await Promise.all([subscribe(stack, alice, { tier: 'pro' }), subscribe(stack, bob, { tier: 'pro' })]);
  [a, b] = await Promise.all([createRunning(alice, 'ckpt-a'), createRunning(bob, 'ckpt-b')]);
}, 240_000);

afterAll(async () => {
  await nc?.drain();
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
  rmSync(checkpointDir, { recursive: true, force: true });
});

describe.runIf(!host.ok)('on a host whose kernel cannot checkpoint', () => {
  it('turns checkpointing off at start, saying why, and sleeps deeply by stopping the agent, which a request boots', async () => {
    if (host.ok) return;
    console.log(`[sleep-checkpoint] this host cannot checkpoint (${host.why}): the fallback is tested instead`);
    // Only a kernel that hangs CRIU's dump is this host's limit; a missing or broken CRIU build is the install's fault.
    expect(host.why).toMatch(/a test dump of a sleeping process did not end/);
    const lines = stack.services.get('provisioner')!.lines();
    expect(lines.some((l) => l.includes('checkpointed sleep off: checkpoint: a test dump of a sleeping process did not end'))).toBe(true);
    await waitFor(
      'asleep, stopped',
      async () => {
        const v = await statusOf(alice, a.id);
        return v.status === 'sleeping' && v.sleep_depth === 'stopped';
      },
      90_000,
      250,
    );
    expect(await inspect(a, '{{.State.Running}}')).toBe('false');
    expect((await call(a)).instance_id).toBe(a.id);
  });
});

describe.skipIf(!host.ok)('the checkpointed deep sleep', () => {
  let before: Awaited<ReturnType<typeof call>>;
  let startedAt: string;

  it('dumps an idle agent to a sealed image: its container runs on with hold-init alone, holding a few MB', async () => {
    before = await call(a);
    // The kernel's cache of names dropped (as a light sleep's reclaim does): the agent's inotify watch on its state
    // file must still be dumped by its path, or the restore cannot reopen it.
    writeFileSync('/proc/sys/vm/drop_caches', '2');
    const awakeMb = await heldMb(`agenthost-${a.id}`);
    startedAt = await inspect(a, '{{.State.StartedAt}}');
    await checkpointed(alice, a);
    expect(await inspect(a, '{{.State.Running}} {{.State.Paused}} {{.State.StartedAt}}')).toBe(`true false ${startedAt}`);
    expect(await processes(`agenthost-${a.id}`)).toEqual(['hold-init']);
    const asleepMb = await heldMb(`agenthost-${a.id}`);
    expect(asleepMb).toBeLessThan(awakeMb / 2);
    // The image is sealed: none of the agent's own text (its instance id is in its memory) is readable on disk.
    const files = readdirSync(imageDir(a));
    expect(files.length).toBeGreaterThan(3);
    for (const f of files) expect(readFileSync(join(imageDir(a), f)).includes(a.id)).toBe(false);
  });

  it('restores the same processes on the first request, with their memory, and a key stored while asleep loaded', async () => {
    await checkpointed(alice, a);
    const key = `sk-${randomBytes(12).toString('hex')}`;
    recordSecret(key);
    expect((await alice.api.post('/keys/store', { instance_id: a.id, keys: { OPENAI_API_KEY: key } })).status).toBe(200);
    const after = await call(a);
    // The same process (its pid in the container, its boot count and birth), not a new boot.
    expect(after).toMatchObject({ instance_id: a.id, pid: before.pid, state: before.state });
    expect((await statusOf(alice, a.id)).status).toBe('running');
    expect(await inspect(a, '{{.State.StartedAt}} {{.RestartCount}}')).toBe(`${startedAt} 0`);
    expect(existsSync(imageDir(a))).toBe(false);
    // The restore closed its connections: the bootstrap's key watch reconnects and the agent reloads the new key.
    const keys = await waitFor(
      'the key in the restored agent',
      async () => {
        const r = await edge.request(`${a.url}/keys`, { headers: owns(a) });
        return (r.json.names as string[] | undefined)?.includes('OPENAI_API_KEY') ? r : undefined;
      },
      20_000,
      250,
    );
    expect((keys.json.sha256 as Record<string, string>).OPENAI_API_KEY).toBe(sha(key));
  });

  it('lets a WebSocket client reconnect to a checkpointed agent', async () => {
    await checkpointed(alice, a);
    const ws = await edge.websocket(`${a.url}/ws`, owns(a));
    expect(JSON.parse(await ws.receive())).toEqual({ hello: a.id });
    ws.send('after the restore');
    expect(await ws.receive()).toBe('after the restore');
    ws.close();
  });

  it("refuses another tenant's image in its place: the agent boots afresh instead, and its status event says why", async () => {
    await Promise.all([checkpointed(alice, a), checkpointed(bob, b)]);
    const bBefore = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).length;
    // Alice's sealed image put where Bob's was: CRIU alone would run Alice's memory in Bob's container.
    rmSync(imageDir(b), { recursive: true });
    cpSync(imageDir(a), imageDir(b), { recursive: true });
    const answer = await call(b);
    expect(answer.instance_id).toBe(b.id);
    expect(answer.state.born).not.toBe(before.state.born);
    const events = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).slice(bBefore).map((e) => e.data);
    expect(events.find((e) => e.instance_id === b.id && e.wake_warning)).toMatchObject({
      status: 'provisioning',
      wake_warning: expect.stringMatching(/could not be restored from its checkpoint .*does not open.*it boots instead/),
    });
    // Alice's own image still opens for her.
    expect((await call(a)).state).toEqual(before.state);
  });

  it('boots afresh when a record deep in its image was altered: the restore stops there, and its status event says why', async () => {
    const awake = (await call(b)).state;
    await checkpointed(bob, b);
    const seen = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).length;
    // One bit in the middle of the largest sealed file: the inventory opens, so CRIU starts and reads up to that record.
    const files = readdirSync(imageDir(b)).map((f) => join(imageDir(b), f));
    const largest = files.reduce((x, y) => (statSync(y).size > statSync(x).size ? y : x));
    const bytes = readFileSync(largest);
    bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] as number) ^ 1;
    writeFileSync(largest, bytes);
    // A boot, not a restore: the stand-in counts its boots in its volume.
    expect((await call(b)).state.boots).toBe(awake.boots + 1);
    const events = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).slice(seen).map((e) => e.data);
    expect(events.find((e) => e.instance_id === b.id && e.wake_warning)).toMatchObject({
      wake_warning: expect.stringMatching(/could not be restored from its checkpoint .*a part of the image does not open.*it boots instead/),
    });
  });

  it('boots an agent whose memory could not be made whole after its restore (its page server killed), and its status event says why', async () => {
    await checkpointed(bob, b);
    const boots = (await call(b)).state.boots;
    // 160 MB more memory (of the test tier's 256) to install after the restore: time to see the restore end first.
    expect((await call(b, '/ballast?mb=160')).ballast_mb).toBe(160);
    await checkpointed(bob, b);
    const seen = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).length;
    // The page server dies once CRIU's restore has ended, as one killed by the OOM killer would: the restored agent
    // must not run on with pages missing. The held request is answered by the agent booted in its place.
    const killed = killPageServerAfterRestore(Number(await inspect(b, '{{.State.Pid}}')));
    const answer = call(b);
    expect(await killed).toBe(true);
    expect((await answer).state.boots).toBe(boots + 1);
    const events = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).slice(seen).map((e) => e.data);
    const warnings = events.filter((e) => e.instance_id === b.id && e.wake_warning).map((e) => e.wake_warning);
    expect(warnings).toContainEqual(expect.stringMatching(/could not be restored from its checkpoint \(.*the page server failed.*\); it boots instead/));
    expect(existsSync(imageDir(b))).toBe(false);
  }, 180_000);

  it('boots an agent whose container ended while it was checkpointed, and its status event says why', async () => {
    await checkpointed(bob, b);
    const boots = (await call(b)).state.boots;
    await checkpointed(bob, b);
    const seen = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).length;
    // Ended behind the provisioner's back (the reconciler is not due): the image is of processes that are gone.
    await docker('stop', `agenthost-${b.id}`);
    expect((await call(b)).state.boots).toBe(boots + 1);
    const events = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).slice(seen).map((e) => e.data);
    expect(events.find((e) => e.instance_id === b.id && e.wake_warning)).toMatchObject({
      wake_warning: expect.stringMatching(/could not be restored from its checkpoint \(restore: the container is not running\)/),
    });
    expect(existsSync(imageDir(b))).toBe(false);
  });

  it('removes the image with the instance', async () => {
    await checkpointed(alice, a);
    expect(existsSync(imageDir(a))).toBe(true);
    expect((await alice.api.del(`/instance/delete/${a.id}`)).status).toBe(200);
    await waitFor('the image gone', async () => !existsSync(imageDir(a)), 30_000, 250);
  });
});
