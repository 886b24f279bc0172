// Benchmark: the real OpenClaw image (issue #17). In one run, against baselines measured in the same run:
//   1. create → running through the provisioner vs a bare `docker run` of the same image with the plain
//      `openclaw gateway` command and the same limits (one of each at a time, BENCH_ROUNDS rounds);
//   2. 5 concurrent creates through the provisioner (the only step with more than 2 agents at once);
//   3. restart of a stopped instance container → first /readyz 200 (what a wake from sleep costs at least), and
//      a real wake: an instance put to sleep by the provisioner, one HTTPS request through the edge (Caddy and its
//      route keeper) → the agent's first response byte;
//   4. idle memory per instance after BENCH_IDLE_S (60) s: RSS and where it goes (/proc/<pid>/smaps_rollup:
//      anonymous = heap and buffers, file-backed = code), and the gateway's start profile from its log lines.
// Usage: bash bench/run.sh openclaw   (or node bench/openclaw/run.ts with the infra env loaded)
// Targets (issue #17): create → running p50 ≤ 6 s, wake → first response p50 ≤ 3 s, idle RSS ≤ 450 MB.
// Results: bench/results/openclaw.json.

import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadInfraEnv } from '../../packages/testkit/src/infra-env.ts';
import { docker, dockerQuiet, memoryOf, readyz, sleep, startProfile } from './container.ts';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
loadInfraEnv();
const { startEdge, startStack, testAsserter } = await import('../../packages/testkit/src/index.ts');
const { wakeThroughEdge } = await import('./wake.ts');
const { contracts, request, DEFAULT_TIERS: TIERS } = await import('../../packages/shared/src/index.ts');
const { firewallTag, removeFirewall } = await import('../../services/provisioner/src/docker/firewall.ts');
const { heapMb } = await import('../../services/provisioner/src/docker/spec.ts');
type Nc = Parameters<typeof request>[0];

const num = (name: string, def: number) => Number(process.env[name] ?? def);
const ROUNDS = num('BENCH_ROUNDS', 3);
const CONCURRENT = num('BENCH_CONCURRENCY', 5);
const IDLE_S = num('BENCH_IDLE_S', 60);
const WAKE_IDLE_S = num('BENCH_WAKE_IDLE_S', 5);
const IMAGE = process.env.BENCH_IMAGE ?? 'agenthost/openclaw:latest';
const TIER = 'pro' as const;
const LIMITS = { memory_mb: TIERS[TIER].memory_mb, cpus: TIERS[TIER].cpus, pids: TIERS[TIER].pids };
// The openclaw helper's port range (19450–19499): provisioner leases 19460–19479, bare containers 19480+, the
// edge 19496 (HTTPS) and 19497 (HTTP).
const PROV_PORTS: [number, number] = [19460, 19479];
const BARE_PORT = 19480;
const tag = randomBytes(3).toString('hex');
const provNetwork = `ah-bench-oc-${tag}`;
const bareLabel = `agenthost.bench=oc-${tag}`;
const TOKEN = randomBytes(24).toString('hex');
// Calls for a user carry the gateway's assertion, as the gateway's own do.
const asserter = testAsserter();

const log = (msg: string) => process.stderr.write(`[bench:openclaw] ${msg}\n`);

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]! : NaN;
};
const stats = (xs: number[]) => ({ n: xs.length, p50: Math.round(pct(xs, 50)), p99: Math.round(pct(xs, 99)), max: Math.round(Math.max(...xs)) });

/** A bare container: the provisioner's hardening flags and the tier's limits, the plain `openclaw gateway` command. */
async function bareRun(name: string, port: number): Promise<void> {
  const mem = `${LIMITS.memory_mb}m`;
  await docker(
    'run',
    '-d',
    '--name',
    name,
    '--label',
    bareLabel,
    '--user',
    '10001:10001',
    '--read-only',
    '--tmpfs',
    '/tmp:rw,nosuid,nodev,size=64m,mode=1777',
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges:true',
    '--pids-limit',
    String(LIMITS.pids),
    '--memory',
    mem,
    '--memory-swap',
    mem,
    '--cpus',
    String(LIMITS.cpus),
    '-p',
    `127.0.0.1:${port}:18789`,
    '--mount',
    `type=volume,source=${name},target=/data,volume-label=${bareLabel}`,
    '-e',
    `OPENCLAW_GATEWAY_TOKEN=${TOKEN}`,
    '-e',
    `NODE_OPTIONS=--max-old-space-size=${heapMb(LIMITS.memory_mb)}`,
    '--entrypoint',
    '/usr/local/bin/openclaw',
    IMAGE,
    'gateway',
    '--allow-unconfigured',
    '--bind',
    'lan',
    '--port',
    '18789',
    '--auth',
    'token',
  );
}

async function removeBare(name: string): Promise<void> {
  await dockerQuiet('rm', '-f', '-v', name);
  await dockerQuiet('volume', 'rm', '-f', name);
}

async function createAndWait(nc: Nc, user_id: string, n: number): Promise<{ ms: number[]; ids: string[]; failures: number }> {
  const P = contracts.provisioner;
  const done = new Map<string, number>();
  const sub = nc.subscribe('events.instance.status', {
    callback: (_e: unknown, m: { data: Uint8Array }) => {
      const e = JSON.parse(new TextDecoder().decode(m.data)) as { instance_id: string; status: string };
      if (e.status === 'running' || e.status === 'failed') done.set(e.instance_id, e.status === 'running' ? performance.now() : -1);
    },
  });
  const started = new Map<string, number>();
  let failures = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      const t0 = performance.now();
      try {
        const c = await request(nc, P.create, { user_id, tier: TIER, framework: 'openclaw' }, { timeoutMs: 120_000, asserter });
        started.set(c.instance_id, t0);
      } catch (err) {
        failures++;
        log(`create failed: ${(err as Error).message}`);
      }
    }),
  );
  const deadline = Date.now() + 300_000;
  while ([...started.keys()].some((id) => !done.has(id)) && Date.now() < deadline) await sleep(50);
  sub.unsubscribe();
  const ms: number[] = [];
  for (const [id, t0] of started) {
    const t1 = done.get(id);
    if (t1 === undefined || t1 < 0) failures++;
    else ms.push(t1 - t0);
  }
  return { ms, ids: [...started.keys()], failures };
}

const remove = (nc: Nc, user_id: string, ids: string[]) =>
  Promise.all(ids.map((instance_id) => request(nc, contracts.provisioner.remove, { user_id, instance_id }, { timeoutMs: 120_000, asserter }).catch(() => {})));

// ---------------------------------------------------------------- main

await docker('image', 'inspect', IMAGE).catch(() => {
  throw new Error(`${IMAGE} is not built: run deploy/images/build.sh openclaw`);
});
const [repoName, version] = IMAGE.split(':') as [string, string];
log(`starting nats, database, keyvault, provisioner (${IMAGE}, tier ${TIER}: ${LIMITS.memory_mb} MB, ${LIMITS.cpus} CPU)`);
const stack = await startStack({
  services: ['keyvault', 'provisioner'],
  serviceEnv: {
    provisioner: {
      FRAMEWORK_IMAGES: JSON.stringify({ openclaw: repoName }),
      DEFAULT_VERSION: version,
      INSTANCE_NETWORK: provNetwork,
      PORT_RANGE_START: String(PROV_PORTS[0]),
      PORT_RANGE_END: String(PROV_PORTS[1]),
      // free: the same limits, and sleeps after WAKE_IDLE_S (pro never does), for the wake measurement.
      TIER_LIMITS_JSON: JSON.stringify({ [TIER]: LIMITS, free: LIMITS }),
      SLEEP_AFTER_IDLE_SECONDS_JSON: JSON.stringify({ free: WAKE_IDLE_S, pro: 0, enterprise: 0 }),
      SLEEP_CHECK_INTERVAL_SECONDS: '1',
      INSTANCE_URL_TEMPLATE: 'https://{id}.agenthost.localhost:19496',
      INSTANCE_EXTRA_ENV_JSON: JSON.stringify({ AGENTHOST_BOOTSTRAP_SKIP_KEYS: '1' }),
      READY_TIMEOUT_SECONDS: '240',
      NATS_REQUEST_TIMEOUT_MS: '30000',
    },
  },
});
const nc = (await stack.nats.connect()) as Nc;
const edge = await startEdge(stack, { httpsPort: 19496, httpPort: 19497, env: { EDGE_ACTIVITY_SECONDS: '1', EDGE_WAKE_TIMEOUT_SECONDS: '240' } });
const user_id = randomUUID();
let exitCode = 0;
try {
  const bare: number[] = [];
  const prov: number[] = [];
  let failures = 0;
  const profiles: Record<string, unknown> = {};
  for (let r = 0; r < ROUNDS; r++) {
    // Alternating order, one agent at a time: drift weighs on both sides alike.
    const phases = [
      async () => {
        const name = `ah-bench-oc-${tag}-${r}`;
        const t0 = performance.now();
        await bareRun(name, BARE_PORT);
        if (await readyz(BARE_PORT, Date.now() + 240_000)) bare.push(performance.now() - t0);
        else failures++;
        if (r === 0) profiles.bare = await startProfile(name);
        await removeBare(name);
      },
      async () => {
        const c = await createAndWait(nc, user_id, 1);
        prov.push(...c.ms);
        failures += c.failures;
        if (r === 0 && c.ids[0]) profiles.provisioner = await startProfile(`agenthost-${c.ids[0]}`);
        await remove(nc, user_id, c.ids);
      },
    ];
    for (const phase of r % 2 ? phases.reverse() : phases) await phase();
    log(`round ${r + 1}/${ROUNDS}: bare ${Math.round(bare.at(-1) ?? NaN)} ms, provisioner ${Math.round(prov.at(-1) ?? NaN)} ms`);
  }

  log(`${CONCURRENT} concurrent creates`);
  const burst = await createAndWait(nc, user_id, CONCURRENT);
  failures += burst.failures;
  await remove(nc, user_id, burst.ids);

  log(`one instance: idle ${IDLE_S} s, then memory; then stop → start → /readyz (wake floor)`);
  const one = await createAndWait(nc, user_id, 1);
  failures += one.failures;
  const id = one.ids[0]!;
  await sleep(IDLE_S * 1000);
  const idle = await memoryOf(`agenthost-${id}`);
  const port = Number(await docker('inspect', '-f', '{{(index (index .NetworkSettings.Ports "18789/tcp") 0).HostPort}}', `agenthost-${id}`));
  const wake: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    await docker('stop', `agenthost-${id}`);
    const t0 = performance.now();
    await docker('start', `agenthost-${id}`);
    if (await readyz(port, Date.now() + 240_000)) wake.push(performance.now() - t0);
    else failures++;
  }
  await remove(nc, user_id, one.ids);

  log(`wake through the edge: a free instance sleeps after ${WAKE_IDLE_S} s idle, then one request wakes it (${ROUNDS} rounds)`);
  const woken = await wakeThroughEdge({ nc, edge, asserter, rounds: ROUNDS, log });
  failures += woken.failures;

  const b = stats(bare);
  const p = stats(prov);
  const result = {
    benchmark: 'openclaw',
    when: new Date().toISOString(),
    host: { cpus: os.cpus().length, memory_gb: Math.round(os.totalmem() / 2 ** 30), loadavg_1m: os.loadavg()[0] },
    image: IMAGE,
    tier: TIER,
    limits: LIMITS,
    bare_docker_run_to_ready_ms: b,
    provisioner_create_to_running_ms: p,
    ratio_p50: Math.round((p.p50 / b.p50) * 100) / 100,
    concurrent_creates_to_running_ms: { concurrency: CONCURRENT, ...stats(burst.ms) },
    restart_to_ready_ms: stats(wake),
    wake_to_first_byte_ms: stats(woken.ms),
    wake_ratio_to_restart_p50: Math.round((pct(woken.ms, 50) / pct(wake, 50)) * 100) / 100,
    idle_memory_after_s: IDLE_S,
    idle_memory: idle,
    instances_per_gib_by_idle_rss: Math.round((1024 / Math.max(1, idle.rss_mb)) * 10) / 10,
    start_profile_ms: profiles,
    failures,
    targets: { create_to_running_p50_ms: 6000, wake_p50_ms: 3000, idle_rss_mb: 450 },
    targets_met: { create: p.p50 <= 6000, wake: stats(woken.ms).p50 <= 3000, idle_rss: idle.rss_mb <= 450 },
  };
  console.log(JSON.stringify(result, null, 2));
  mkdirSync(path.join(repo, 'bench/results'), { recursive: true });
  writeFileSync(path.join(repo, 'bench/results/openclaw.json'), `${JSON.stringify(result, null, 2)}\n`);
  if (failures) exitCode = 1;
} catch (err) {
  log(`failed: ${(err as Error).stack ?? err}`);
  exitCode = 1;
} finally {
  await (nc as unknown as { drain(): Promise<void> }).drain().catch(() => {});
  await edge.stop().catch(() => {});
  await stack.stop().catch((err: unknown) => log(`stopping the stack: ${(err as Error).message}`));
  for (const label of [`agenthost.scope=${provNetwork}`, bareLabel]) {
    const ids = (await dockerQuiet('ps', '-aq', '--filter', `label=${label}`)).split('\n').filter(Boolean);
    if (ids.length) await dockerQuiet('rm', '-f', '-v', ...ids);
    const vols = (await dockerQuiet('volume', 'ls', '-q', '--filter', `label=${label}`)).split('\n').filter(Boolean);
    if (vols.length) await dockerQuiet('volume', 'rm', '-f', ...vols);
  }
  await dockerQuiet('network', 'rm', provNetwork);
  await removeFirewall(firewallTag(provNetwork)).catch(() => 0);
}
process.exit(exitCode);
