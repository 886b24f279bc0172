import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkpointHost,
  cleanupDocker,
  docker,
  openclawProcesses,
  recordSecret,
  signIn,
  startTestLlm,
  storedEvents,
  subscribe,
  testNetwork,
  useTestLlm,
  waitFor,
  type Edge,
  type Session,
  type Stack,
  type TestLlm,
} from '@agenthost/testkit';
import { agentTree, heldMb, processes, timedGet } from './checkpoint-probes.ts';
import { realOpenclaw, sleepStack, statusOf, untilRunning } from './sleep-stack.ts';

// The checkpointed deep sleep with the real OpenClaw image, through the real edge (docs/decisions/0049-...): after
// DEEP idle seconds the agent's processes (the bootstrap and the OpenClaw gateway under hold-init) are dumped by CRIU
// to an image sealed to its instance, container and checkpoint, its container runs on with hold-init alone, and the
// owner's next request restores the same processes. A key stored while it slept is the one its next model call
// carries (the restore closes the bootstrap's key watch, which reconnects), its volume and the Control UI's WebSocket
// are as before. The model provider is a stub on this host.
// The figures the issue asks for are printed, not asserted: the wake → first byte of the first request, and the
// first turn after the wake against the turns before the sleep. 29 Nov, load 4-5 on 2 cores, three runs: wake → first
// byte 4.1, 7.0, 5.1 s; first turn after the wake 4.9, 6.5, 10.3 s (the new key at once each time) against 1.5, 4.2,
// 1.2 s for a turn before the sleep (and 22.4, 19.9, 28.6 s for the first turn after the boot); the container's
// cgroup 886-930 MB awake, 40-50 MB asleep; the sealed image 191-198 MB.
// Those runs had `--irmap-scan-path /opt` on checkpoint.sh's dump: without it CRIU cannot dump OpenClaw once it has
// had a turn (its gateway then watches two skills directories of its bundled extensions on the image's overlayfs,
// whose inotify handles do not open: "fsnotify: Can't dump that handle"), and the agent is stopped instead.
// Ports of this suite: instances 18940-18944, the edge 18946 (HTTPS) and 18947 (HTTP).
// Long enough for the steps after a request; the boot may take longer than this (the agent then sleeps at once, and
// the next request restores it), so each step that reaches into the container comes right after a request.
const DEEP = 30;
const network = testNetwork('sleep-ckpt-oc');
const checkpointDir = mkdtempSync(join(tmpdir(), 'agenthost-ckpt-oc-'));
const checkpointKey = randomBytes(32).toString('base64');

let stack: Stack;
let edge: Edge;
let nc: NatsConnection;
let owner: Session;
let llm: TestLlm;

beforeAll(async () => {
  recordSecret(checkpointKey);
  await cleanupDocker(network);
  llm = await startTestLlm();
  ({ stack, edge } = await sleepStack({
    network,
    ports: [18940, 18944],
    edgePorts: { https: 18946, http: 18947 },
    idle: {},
    deep: { pro: DEEP },
    provisioner: {
      ...realOpenclaw,
      CHECKPOINT_KEY: checkpointKey,
      CHECKPOINT_DIR: checkpointDir,
    },
    edge: { EDGE_WAKE_TIMEOUT_SECONDS: '120' },
  }));
  nc = await stack.nats.connect();
  owner = await signIn(stack.api);
  await subscribe(stack, owner, { tier: 'pro' });
}, 240_000);

afterAll(async () => {
  llm?.stop();
  await nc?.drain();
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
  rmSync(checkpointDir, { recursive: true, force: true });
});

const container = (id: string) => `agenthost-${id}`;
const inspect = async (id: string, format: string) => (await docker('inspect', '-f', format, container(id))).trim();
/** Where the provisioner keeps an instance's sealed image: <CHECKPOINT_DIR>/<scope>/<instance>. */
const imageDir = (id: string) => join(checkpointDir, network, id);
const imageMb = (id: string) => readdirSync(imageDir(id)).reduce((n, f) => n + statSync(join(imageDir(id), f)).size, 0) / 2 ** 20;

/** Asleep checkpointed: its status says so, its sealed image is in place, and hold-init alone runs in its container. */
async function checkpointed(id: string): Promise<void> {
  await waitFor(
    'checkpointed',
    async () => {
      const v = await statusOf(owner, id);
      // A dump that fails stops the agent instead: the provisioner's log says why ("could not be checkpointed").
      if (v.status === 'sleeping' && v.sleep_depth === 'stopped')
        throw new Error('asleep stopped, not checkpointed: the dump failed (see the provisioner log)');
      if (v.status !== 'sleeping' || v.sleep_depth !== 'checkpointed' || !existsSync(imageDir(id))) return undefined;
      return (await processes(container(id))).join() === 'hold-init' || undefined;
    },
    150_000,
    250,
  );
}

/** The owner's request through the edge: it wakes the instance if it sleeps, and counts as its traffic. */
async function touch(url: string, token: string): Promise<void> {
  expect((await edge.request(`${url}/`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
}

/** One agent turn through the edge and OpenClaw's OpenAI-compatible endpoint: the Authorization its model call carried, and its time. */
async function turn(url: string, token: string, text: string): Promise<{ authorization: string; ms: number }> {
  const before = llm.calls.length;
  const t0 = performance.now();
  const r = await edge.request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openclaw', messages: [{ role: 'user', content: text }] }),
    // An agent's first turn after its boot loads its plugin catalog first.
    timeoutMs: 120_000,
  });
  const ms = performance.now() - t0;
  expect(r.status, r.text).toBe(200);
  expect(llm.calls.length).toBeGreaterThan(before);
  return { authorization: llm.calls.at(-1)!.authorization, ms };
}

const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

// Where this host's kernel hangs CRIU's dumps, checkpointing is off and sleep-checkpoint.test.ts asserts the fallback.
const host = await checkpointHost();
if (!host.ok) console.log(`[checkpoint openclaw] skipped: this host cannot checkpoint (${host.why})`);

describe.skipIf(!host.ok)('the checkpointed deep sleep of a real OpenClaw agent', () => {
  let id: string;
  let url: string;
  let token: string;
  const first = `sk-first-${randomBytes(8).toString('hex')}`;
  const second = `sk-second-${randomBytes(8).toString('hex')}`;
  recordSecret(first);
  recordSecret(second);
  let before: Awaited<ReturnType<typeof openclawProcesses>>;
  let tree: Awaited<ReturnType<typeof agentTree>>;
  let startedAt: string;
  const turns: Record<string, number> = {};

  it('dumps the idle agent after a turn: asleep checkpointed, hold-init alone in its container, the image sealed', async () => {
    const created = await owner.api.post('/instance/create', { framework: 'openclaw' });
    expect(created.status, created.text).toBe(200);
    ({ instance_id: id, url, access_token: token } = created.body as { instance_id: string; url: string; access_token: string });
    recordSecret(token);
    await untilRunning(owner, id);
    expect((await owner.api.post('/keys/store', { instance_id: id, keys: { OPENAI_API_KEY: first } })).status).toBe(200);
    await touch(url, token);
    await useTestLlm(container(id), llm.port);
    expect((await owner.api.post(`/instance/restart/${id}`)).status).toBe(200);
    await untilRunning(owner, id);
    // The restart made the container anew: hold-init is its PID 1 (checkpointing is on here).
    expect(await inspect(id, '{{index .Config.Entrypoint 0}} {{.HostConfig.Init}}')).toBe('/opt/agenthost-criu/hold-init false');

    const cold = await turn(url, token, 'remember the word heron');
    expect(cold.authorization).toBe(`Bearer ${first}`);
    const warm = await turn(url, token, 'and the word otter');
    expect(warm.authorization).toBe(`Bearer ${first}`);
    turns.coldBeforeSleep = cold.ms;
    turns.warmBeforeSleep = warm.ms;
    expect((await statusOf(owner, id)).status).toBe('running');
    before = await openclawProcesses(container(id));
    expect(before.length).toBe(2); // hold-init (PID 1) and the bootstrap
    tree = await agentTree(container(id));
    expect(tree.length).toBeGreaterThanOrEqual(3); // hold-init, the bootstrap, the gateway
    startedAt = await inspect(id, '{{.State.StartedAt}} {{.RestartCount}}');
    await docker('exec', container(id), 'sh', '-c', 'echo kept > /data/home/sleep-marker');
    const awakeMb = Math.round(await heldMb(container(id)));

    await checkpointed(id);
    expect(await inspect(id, '{{.State.Running}} {{.State.Paused}}')).toBe('true false');
    expect(await inspect(id, '{{.State.StartedAt}} {{.RestartCount}}')).toBe(startedAt);
    expect(await processes(container(id))).toEqual(['hold-init']);
    // The image is sealed: neither the key the agent holds in its memory nor its instance id is readable on disk.
    const files = readdirSync(imageDir(id));
    expect(files.length).toBeGreaterThan(3);
    for (const f of files) {
      const b = readFileSync(join(imageDir(id), f));
      expect(b.includes(first) || b.includes(id)).toBe(false);
    }
    console.log(
      `[checkpoint openclaw] processes ${tree.map((p) => `${p.pid}/${p.ppid}/${p.comm}`).join(' ')}; cgroup awake ${awakeMb} MB, asleep ${Math.round(await heldMb(container(id)))} MB; sealed image ${imageMb(id).toFixed(0)} MB in ${files.length} files`,
    );
  }, 480_000);

  it('restores the same processes on the first request (wake → first byte printed), the key stored while asleep in the next model call, the volume, the Control UI WebSocket; the image goes with the instance', async () => {
    expect(id, 'the first test made the instance').toBeDefined();
    await checkpointed(id);
    const stored = await owner.api.put('/keys/update', { instance_id: id, key_name: 'OPENAI_API_KEY', key_value: second });
    expect(stored.body).toMatchObject({ applied: false, reason: 'the instance is asleep: it loads its keys when it wakes' });
    const eventsBefore = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).length;

    // The first request wakes it: restored, not booted, and answered by OpenClaw.
    const page = await timedGet(edge, `${url}/`, token);
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/<html/i);
    expect((await statusOf(owner, id)).status).toBe('running');
    const events = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).slice(eventsBefore).map((e) => e.data);
    expect(events.filter((e) => e.instance_id === id).map((e) => e.status)).not.toContain('provisioning');
    expect(events.find((e) => e.instance_id === id && e.wake_warning)).toBeUndefined();
    expect(existsSync(imageDir(id))).toBe(false);
    // The same container (Docker's start time and restarts) and the same processes: the same pids, the whole tree.
    expect(await inspect(id, '{{.State.StartedAt}} {{.RestartCount}}')).toBe(startedAt);
    // A boot in this container would give the bootstrap and OpenClaw new pids (the namespace's counter moved on).
    // Start times: hold-init (never dumped) keeps its own; the restored processes get the moment CRIU forked them
    // back (the kernel stamps a process's start when it is forked, and Docker gives the container no time namespace
    // CRIU could shift), so theirs are printed, not compared.
    const after = await openclawProcesses(container(id));
    expect(after.map((p) => p.pid)).toEqual(before.map((p) => p.pid));
    expect(after.map((p) => p.env)).toEqual(before.map((p) => p.env));
    expect(after[0]).toMatchObject({ pid: '1', started: before[0]!.started });
    const restored = await agentTree(container(id));
    const shape = (t: typeof tree) => t.map((p) => `${p.pid}/${p.ppid}/${p.comm}`);
    expect(shape(restored)).toEqual(shape(tree));
    const starts = tree.map((p) => `${p.comm} ${p.pid}: ${p.started} → ${restored.find((q) => q.pid === p.pid)?.started}`).join(', ');

    // The first turn after the wake, then (the key watch reconnecting after the restore closed its connection) the
    // stored key in its model call.
    const next = await turn(url, token, 'which words?');
    turns.firstAfterWake = next.ms;
    let keyAfterMs = 0;
    const t0 = performance.now();
    if (next.authorization !== `Bearer ${second}`) {
      await waitFor(
        'the stored key in use',
        async () => ((await turn(url, token, 'which words now?')).authorization === `Bearer ${second}` ? true : undefined),
        30_000,
        1000,
      );
      keyAfterMs = performance.now() - t0;
    }
    expect((await docker('exec', container(id), 'cat', '/data/home/sleep-marker')).trim()).toBe('kept');
    // The Control UI's WebSocket: OpenClaw opens with its connect challenge.
    const ws = await edge.websocket(`${url}/`, { authorization: `Bearer ${token}` });
    expect(JSON.parse(await ws.receive())).toMatchObject({ type: 'event', event: 'connect.challenge' });
    ws.close();

    console.log(
      `[checkpoint openclaw] wake → first byte ${s(page.firstByteMs)} (whole answer ${s(page.totalMs)}); ` +
        `turns before the sleep: first after boot ${s(turns.coldBeforeSleep!)}, next ${s(turns.warmBeforeSleep!)}; ` +
        `first turn after the wake ${s(turns.firstAfterWake!)} (key ${next.authorization === `Bearer ${second}` ? 'new at once' : `new after ${s(keyAfterMs)} more`}); ` +
        `start ticks ${starts}`,
    );

    // Asleep again, then deleted: the image goes with the instance.
    await checkpointed(id);
    expect((await owner.api.del(`/instance/delete/${id}`)).status).toBe(200);
    await waitFor('the image gone', async () => !existsSync(imageDir(id)) || undefined, 60_000, 250);
  }, 480_000);
});
