import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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
import { processes } from './checkpoint-probes.ts';
import { sleepStack, statusOf, untilRunning } from './sleep-stack.ts';

// The warm pool (docs/decisions/0063-...), end to end: the provisioner keeps one pro stand-in agent booted and
// checkpointed, ownerless; a create claims it (restored from its own image, its owner's credentials handed over, its
// keys brought by the key watch) and the pool boots the next one. The real edge routes the owner's requests.
// Ports of this suite: instances 18990-18993, the edge 18994 (HTTPS) and 18995 (HTTP).
const VARIANT = 't-pool';
const POOL_USER = '00000000-0000-0000-0000-000000000000';
const network = testNetwork('pool');
const checkpointDir = mkdtempSync(join(tmpdir(), 'agenthost-pool-'));
const checkpointKey = randomBytes(32).toString('base64');
const sha = (v: string) => createHash('sha256').update(v).digest('hex');
const host = await checkpointHost();
const DOCTOR = fileURLToPath(new URL('../../provisioner/src/doctor/main.ts', import.meta.url));

type Agent = { id: string; url: string; token: string; status: string };
let stack: Stack;
let edge: Edge;
let nc: NatsConnection;
let alice: Session;
let bob: Session;

const owns = (x: Agent) => ({ authorization: `Bearer ${x.token}` });
const imageDir = (id: string) => join(checkpointDir, network, id);

/** The pool's agents on the engine (their containers carry the pool's owner), with their instance ids. */
async function pooledContainers(): Promise<string[]> {
  const out = await docker(
    'ps',
    '-a',
    '--filter',
    `label=agenthost.scope=${network}`,
    '--filter',
    `label=agenthost.user=${POOL_USER}`,
    '--format',
    '{{.Names}}',
  );
  return out.split('\n').filter(Boolean);
}

/** Waits until the pool holds a checkpointed agent that is not one of `taken`: its sealed image whole, hold-init alone running. */
async function pooledReady(taken: string[] = []): Promise<string> {
  return waitFor(
    'a checkpointed agent in the pool',
    async () => {
      for (const name of await pooledContainers()) {
        const id = name.replace(/^agenthost-/, '');
        if (taken.includes(id) || !existsSync(imageDir(id))) continue;
        if ((await processes(name).catch(() => [])).join() === 'hold-init') return id;
      }
      return undefined;
    },
    120_000,
    500,
  );
}

async function create(s: Session, name: string): Promise<Agent> {
  const c = await s.api.post('/instance/create', { framework: 'openclaw', name });
  expect(c.status, c.text).toBe(200);
  recordSecret(c.body.access_token);
  return { id: c.body.instance_id, url: c.body.url, token: c.body.access_token, status: c.body.status };
}

async function call(x: Agent, path = '/') {
  const r = await edge.request(`${x.url}${path}`, { headers: owns(x) });
  expect(r.status, r.text).toBe(200);
  return r.json as Record<string, unknown> & { instance_id: string; state: { boots: number; born: string } };
}

beforeAll(async () => {
  recordSecret(checkpointKey);
  await cleanupDocker(network);
  await standinVariant(VARIANT, { AGENTHOST_RELOAD_URL: 'http://127.0.0.1:18789/reload' });
  ({ stack, edge } = await sleepStack({
    network,
    ports: [18990, 18993],
    edgePorts: { https: 18994, http: 18995 },
    idle: {},
    provisioner: {
      DEFAULT_VERSION: VARIANT,
      CHECKPOINT_KEY: checkpointKey,
      CHECKPOINT_DIR: checkpointDir,
      WARM_POOL_JSON: JSON.stringify({ openclaw: { pro: 1 } }),
      RECONCILE_INTERVAL_SECONDS: '3600',
    },
  }));
  nc = await stack.nats.connect();
  [alice, bob] = await Promise.all([signIn(stack.api), signIn(stack.api)]);
  await Promise.all([subscribe(stack, alice, { tier: 'pro' }), subscribe(stack, bob, { tier: 'pro' })]);
}, 240_000);

afterAll(async () => {
  await nc?.drain();
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
  rmSync(checkpointDir, { recursive: true, force: true });
});

describe.runIf(!host.ok)('on a host whose kernel cannot checkpoint', () => {
  it('keeps no pool, says why at start, and creates boot as before', async () => {
    if (host.ok) return;
    const lines = stack.services.get('provisioner')!.lines();
    expect(lines.some((l) => l.includes('warm pool off: the checkpointed sleep is off on this host'))).toBe(true);
    expect(await pooledContainers()).toEqual([]);
    const a = await create(alice, 'no-pool');
    expect(a.status).toBe('provisioning');
    await untilRunning(alice, a.id);
  });
});

describe.skipIf(!host.ok)('the warm pool', () => {
  let a: Agent;
  let poolId: string;
  let born: string;
  let b: Agent;

  it('keeps an agent booted and checkpointed that belongs to nobody: no user lists it and the edge has no route to it', async () => {
    poolId = await pooledReady();
    expect((await alice.api.get('/instance/list')).body.instances).toEqual([]);
    const stranger = await edge.request(`https://${poolId}.agenthost.localhost:18994/`, { headers: { authorization: 'Bearer x' } });
    expect(stranger.status).toBe(404);
  });

  it('serves a create with it: running when the answer comes, the owner’s token through the edge, the same booted agent', async () => {
    poolId = await pooledReady();
    a = await create(alice, 'from-pool');
    expect(a.id).toBe(poolId);
    // The answer says provisioning, as every create's does; the agent already runs when it comes.
    expect(a.status).toBe('provisioning');
    expect(await statusOf(alice, a.id)).toMatchObject({ status: 'running' });
    const first = await call(a);
    // Restored, not booted: the agent's volume counts one boot, the pool's.
    expect(first).toMatchObject({ instance_id: a.id, state: { boots: 1 } });
    born = first.state.born;
    expect(existsSync(imageDir(a.id))).toBe(false);
    const listed = (await alice.api.get('/instance/list')).body.instances as { instance_id: string; name: string }[];
    expect(listed.map((i) => [i.instance_id, i.name])).toEqual([[a.id, 'from-pool']]);
    // The token the create answered is the one the agent was booted with (the agent checks it: OpenClaw's gateway auth).
    const env = await call(a, '/env');
    expect((env.sha256 as Record<string, string>).OPENCLAW_GATEWAY_TOKEN).toBe(sha(a.token));
  });

  it('hands the claimed agent its owner’s credentials: a key stored now reaches it through its key watch', async () => {
    const key = `sk-${randomBytes(12).toString('hex')}`;
    recordSecret(key);
    expect((await alice.api.post('/keys/store', { instance_id: a.id, keys: { OPENAI_API_KEY: key } })).status).toBe(200);
    const keys = await waitFor(
      'the key in the claimed agent',
      async () => {
        const r = await edge.request(`${a.url}/keys`, { headers: owns(a) });
        return (r.json.names as string[] | undefined)?.includes('OPENAI_API_KEY') ? r : undefined;
      },
      30_000,
      250,
    );
    expect((keys.json.sha256 as Record<string, string>).OPENAI_API_KEY).toBe(sha(key));
  });

  it('shows the doctor no difference between the claimed instance, the pool’s agents and a freshly created one', async () => {
    await pooledReady([a.id]);
    const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [DOCTOR, '--json'],
        { env: { PATH: process.env.PATH, ...stack.envFor('provisioner') }, timeout: 120_000 },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      ),
    );
    expect(r.code, r.stderr).not.toBe(2);
    const report = JSON.parse(r.stdout) as { ok: boolean; instances: number; drift: unknown[] };
    expect(report.drift).toEqual([]);
    expect(report).toMatchObject({ ok: true, instances: 2 });
  });

  it('boots the next agent for the pool, and a second tenant’s claim gets that one, never the first', async () => {
    const next = await pooledReady([a.id]);
    expect(next).not.toBe(a.id);
    b = await create(bob, 'second');
    expect(b.id).toBe(next);
    const answer = await call(b);
    expect(answer.instance_id).toBe(b.id);
    expect(answer.state.born).not.toBe(born);
    // Alice's instance is not Bob's to see.
    expect((await bob.api.get(`/instance/status/${a.id}`)).status).toBe(404);
    expect((await call(a)).state.born).toBe(born);
  });

  it('gives one agent to one create: of two at once, one claims it and the other boots', async () => {
    // Four ports: Alice's, the pool's, the two creates' (Bob's first goes: the pool's refill takes one too).
    expect((await bob.api.del(`/instance/delete/${b.id}`)).status).toBe(200);
    const next = await pooledReady([a.id]);
    const [x, y] = await Promise.all([create(alice, 'race-a'), create(bob, 'race-b')]);
    expect([x.id, y.id]).toContain(next);
    const [claimed, booted] = x.id === next ? [x, y] : [y, x];
    const [claimer, booter] = x.id === next ? [alice, bob] : [bob, alice];
    expect((await statusOf(claimer, claimed.id)).status).toBe('running');
    await untilRunning(booter, booted.id);
    expect((await call(booted)).state.born).not.toBe((await call(claimed)).state.born);
    for (const [s, i] of [
      [alice, x],
      [bob, y],
    ] as const)
      expect((await s.api.del(`/instance/delete/${i.id}`)).status).toBe(200);
  });

  it('boots a pooled agent whose image does not open for it, and its status event says why', async () => {
    const next = await pooledReady([a.id]);
    const seen = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).length;
    // Its sealed image gone (a disk cleaned by hand): the claim cannot restore it.
    rmSync(imageDir(next), { recursive: true });
    const c = await create(alice, 'fallback');
    expect(c.id).toBe(next);
    expect(c.status).toBe('provisioning');
    await untilRunning(alice, c.id);
    expect((await call(c)).state.boots).toBe(2);
    const events = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status')).slice(seen).map((e) => e.data);
    expect(events.find((e) => e.instance_id === c.id && e.wake_warning)).toMatchObject({
      wake_warning: expect.stringMatching(/The pooled agent could not be restored \(.*\); it boots instead/),
    });
  });
});
