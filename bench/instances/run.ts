// Benchmark: create → running of agent instances through the provisioner (NATS request → port lease →
// keyvault credentials → volume → hardened container → start → readiness probe → status running, seen as
// the provisioner's events.instance.status), against a bare `docker run` of the same stand-in image with
// the same limits, flags and kind of network, measured in the same run, with the same concurrency and the
// same /readyz polling (50 ms). Each phase starts once the machine is quiet again after the last one.
// Usage: node bench/instances/run.ts    (BENCH_CONCURRENCY=20, BENCH_ROUNDS=4, alternating order)
//
// Reports p50/p99 of both and their ratio/difference, port collisions (must be 0) and failures (must
// be 0); the target is a provisioner p50 within 100 ms of the bare docker run. Both sides skip the
// bootstrap's key fetch (AGENTHOST_BOOTSTRAP_SKIP_KEYS=1: a bare container has no keyvault), so the
// difference is the provisioning overhead. Results go to bench/results/instances.json.

import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadInfraEnv } from '../../packages/testkit/src/infra-env.ts';
import { bareRound, docker, dockerQuiet, type BareOptions } from './bare.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');

// The servers deploy/infra.sh started.
loadInfraEnv();
const { startStack, testAsserter } = await import('../../packages/testkit/src/index.ts');
// The provisioner acts only on a request the gateway signed: the bench signs as the stack's gateway does.
const asserter = testAsserter();
const { contracts, request } = await import('../../packages/shared/src/index.ts');
type Nc = Parameters<typeof request>[0];
const { firewallTag, removeFirewall } = await import('../../services/provisioner/src/docker/firewall.ts');

const num = (name: string, def: number) => Number(process.env[name] ?? def);
const N = num('BENCH_CONCURRENCY', 20);
const ROUNDS = num('BENCH_ROUNDS', 4);
const SETTLE_MS = num('BENCH_SETTLE_MS', 3000);
const IMAGE = process.env.BENCH_IMAGE ?? 'agenthost/standin:latest';
const POLL_MS = 50;
const LIMITS = { memory_mb: 256, cpus: 0.5, pids: 128 };
const PROV_PORTS: [number, number] = [18300, 18399];
const BARE_PORT0 = 18400;
const tag = randomBytes(3).toString('hex');
const provNetwork = `ah-bench-p-${tag}`;
const bareNetwork = `ah-bench-b-${tag}`;
const bareLabel = `agenthost.bench=${tag}`;

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]! : NaN;
};
const stats = (xs: number[]) => ({
  n: xs.length,
  p50: Math.round(pct(xs, 50)),
  p99: Math.round(pct(xs, 99)),
  min: Math.round(Math.min(...xs)),
  max: Math.round(Math.max(...xs)),
});

// ---------------------------------------------------------------- provisioner

async function provisionerRound(nc: Nc): Promise<{ ms: number[]; createMs: number[]; failures: number; ports: number[]; dockerPorts: number[] }> {
  const P = contracts.provisioner;
  const user_id = randomUUID();
  const ms: number[] = [];
  const createMs: number[] = [];
  const ports: number[] = [];
  let failures = 0;
  const started = new Map<string, number>();
  // When each instance became running or failed, from events.instance.status (published once the row says so).
  const done = new Map<string, number>();
  const sub = nc.subscribe('events.instance.status', {
    callback: (_err: unknown, m: { data: Uint8Array }) => {
      const e = JSON.parse(new TextDecoder().decode(m.data)) as { instance_id: string; status: string };
      // Every change is published (provisioning first); only the end of provisioning counts here.
      if (e.status === 'running' || e.status === 'failed') done.set(e.instance_id, e.status === 'running' ? performance.now() : -1);
    },
  });
  await Promise.all(
    Array.from({ length: N }, async () => {
      const t0 = performance.now();
      try {
        const c = await request(nc, P.create, { user_id, tier: 'enterprise', framework: 'openclaw' }, { timeoutMs: 60_000, asserter });
        createMs.push(performance.now() - t0);
        ports.push(c.port);
        started.set(c.instance_id, t0);
      } catch (err) {
        failures++;
        log(`create failed: ${(err as Error).message}`);
      }
    }),
  );
  const deadline = Date.now() + 60_000;
  while ([...started.keys()].some((id) => !done.has(id)) && Date.now() < deadline) await sleep(20);
  sub.unsubscribe();
  for (const [id, t0] of started) {
    const t1 = done.get(id);
    if (t1 === undefined || t1 < 0) failures++;
    else ms.push(t1 - t0);
  }
  // The ports Docker actually published, to check for collisions independently of the database.
  const published = await dockerQuiet('ps', '--filter', `label=agenthost.scope=${provNetwork}`, '--format', '{{.Ports}}');
  const dockerPorts = [...published.matchAll(/127\.0\.0\.1:(\d+)->18789/g)].map((m) => Number(m[1]));
  await Promise.all(
    [...started.keys()].map((instance_id) => request(nc, P.remove, { user_id, instance_id }, { timeoutMs: 60_000, asserter }).catch(() => failures++)),
  );
  return { ms, createMs, failures, ports, dockerPorts };
}

/**
 * Wait until the previous phase's clean-up is over: the kernel and the engine tear down namespaces, veths
 * and shims for seconds after `docker rm` returns, and a phase that starts meanwhile pays for it (the
 * second phase of a round was ~400 ms slower, whichever it was). Quiet = under 25 % of the CPUs busy over
 * half a second (at most 30 s), then SETTLE_MS more.
 */
async function quiet(): Promise<void> {
  const busy = async () => {
    const read = () => readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const a = read();
    await sleep(500);
    const b = read();
    const d = b.map((x, i) => x - a[i]!);
    const total = d.reduce((x, y) => x + y, 0);
    return total > 0 ? 1 - (d[3]! + (d[4] ?? 0)) / total : 0; // idle + iowait
  };
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline && (await busy()) > 0.25) {
    /* still cleaning up */
  }
  await sleep(SETTLE_MS);
}

// ---------------------------------------------------------------- main

const collisions = (ports: number[]) => ports.length - new Set(ports).size;

log(`starting nats, database, keyvault, provisioner, gateway (image ${IMAGE}, ${N} concurrent, ${ROUNDS} rounds)`);
await docker('image', 'inspect', IMAGE).catch(() => {
  throw new Error(`${IMAGE} is not built: run deploy/images/build.sh standin`);
});
const [repoName, version] = IMAGE.split(':') as [string, string];
const stack = await startStack({
  services: ['keyvault', 'provisioner'],
  serviceEnv: {
    provisioner: {
      FRAMEWORK_IMAGES: JSON.stringify({ openclaw: repoName }),
      DEFAULT_VERSION: version,
      INSTANCE_NETWORK: provNetwork,
      PORT_RANGE_START: String(PROV_PORTS[0]),
      PORT_RANGE_END: String(PROV_PORTS[1]),
      TIER_LIMITS_JSON: JSON.stringify({ enterprise: LIMITS }),
      INSTANCE_EXTRA_ENV_JSON: JSON.stringify({ AGENTHOST_BOOTSTRAP_SKIP_KEYS: '1' }),
      NATS_REQUEST_TIMEOUT_MS: '10000',
    },
  },
});
await docker('network', 'create', '-o', 'com.docker.network.bridge.enable_icc=false', '--label', bareLabel, bareNetwork);
const bareRun: BareOptions = { n: N, tag, image: IMAGE, limits: LIMITS, network: bareNetwork, label: bareLabel, port0: BARE_PORT0, pollMs: POLL_MS, log };
const nc = await stack.nats.connect();
let exitCode = 0;
try {
  // Warm-up (page cache, first-use costs on both paths), not measured.
  log('warm-up');
  await bareRound(bareRun, -1);
  await provisionerRound(nc);

  const bare = { ms: [] as number[], runMs: [] as number[], failures: 0, collisions: 0 };
  const prov = { ms: [] as number[], createMs: [] as number[], failures: 0, collisions: 0 };
  // p50 of each round, per side: adjacent rounds see the same background load.
  const rounds = Array.from({ length: ROUNDS }, () => ({ bare: NaN, provisioner: NaN }));
  const runBare = async (r: number) => {
    log(`round ${r + 1}/${ROUNDS}: bare docker run × ${N}`);
    const b = await bareRound(bareRun, r);
    bare.ms.push(...b.ms);
    bare.runMs.push(...b.runMs);
    rounds[r]!.bare = Math.round(pct(b.ms, 50));
    bare.failures += b.failures;
    bare.collisions += collisions(b.ports);
  };
  const runProv = async (r: number) => {
    log(`round ${r + 1}/${ROUNDS}: provisioner create × ${N}`);
    const p = await provisionerRound(nc);
    prov.ms.push(...p.ms);
    rounds[r]!.provisioner = Math.round(pct(p.ms, 50));
    prov.createMs.push(...p.createMs);
    prov.failures += p.failures;
    prov.collisions += collisions(p.ports) + collisions(p.dockerPorts);
  };
  for (let r = 0; r < ROUNDS; r++) {
    // Alternate the order (A B, B A, ...) so that drift and the previous phase's clean-up weigh on both
    // sides alike; let the engine settle between phases.
    const order = r % 2 === 0 ? [runBare, runProv] : [runProv, runBare];
    for (const phase of order) {
      await quiet();
      await phase(r);
    }
  }
  const b = stats(bare.ms);
  const p = stats(prov.ms);
  const c = stats(prov.createMs);
  const br = stats(bare.runMs);
  const result = {
    benchmark: 'instances',
    when: new Date().toISOString(),
    host: { cpus: os.cpus().length, memory_gb: Math.round(os.totalmem() / 2 ** 30) },
    image: IMAGE,
    concurrency: N,
    rounds: ROUNDS,
    limits: LIMITS,
    poll_ms: POLL_MS,
    bare_docker_run_to_ready_ms: b,
    provisioner_create_to_running_ms: p,
    provisioner_create_call_ms: c,
    bare_docker_run_call_ms: br,
    ratio_p50: Math.round((p.p50 / b.p50) * 100) / 100,
    ratio_p99: Math.round((p.p99 / b.p99) * 100) / 100,
    added_p50_ms: p.p50 - b.p50,
    added_p99_ms: p.p99 - b.p99,
    per_round_p50_ms: rounds,
    port_collisions: prov.collisions + bare.collisions,
    failures: prov.failures + bare.failures,
    target: { added_p50_ms_max: 100, port_collisions: 0, failures: 0 },
    target_met: p.p50 - b.p50 <= 100 && prov.collisions === 0 && prov.failures === 0 && bare.failures === 0,
  };
  const row = (name: string, s: { n: number; p50: number; p99: number; min: number; max: number }) =>
    `${name.padEnd(36)} ${String(s.n).padStart(4)} ${String(s.p50).padStart(7)} ${String(s.p99).padStart(7)} ${String(s.min).padStart(7)} ${String(s.max).padStart(7)}`;
  console.log(`\ninstances: ${N} concurrent creates → running, ${ROUNDS} round(s), ${IMAGE}, ${os.cpus().length} CPUs`);
  console.log(`${'path (ms)'.padEnd(36)} ${'n'.padStart(4)} ${'p50'.padStart(7)} ${'p99'.padStart(7)} ${'min'.padStart(7)} ${'max'.padStart(7)}`);
  console.log(row('bare docker run → /readyz 200', b));
  console.log(row('provisioner create → running', p));
  console.log(row('  (docker run call alone)', br));
  console.log(row('  (create call alone)', c));
  console.log(`ratio p50 ${result.ratio_p50}  p99 ${result.ratio_p99}   added p50 ${result.added_p50_ms} ms  p99 ${result.added_p99_ms} ms`);
  console.log(`per round p50 (bare/provisioner): ${rounds.map((x) => `${x.bare}/${x.provisioner}`).join('  ')}`);
  console.log(
    `port collisions ${result.port_collisions}   failures ${result.failures}   target (p50 +≤100 ms, 0 collisions, 0 failures): ${result.target_met ? 'met' : 'NOT met'}\n`,
  );
  mkdirSync(path.join(repo, 'bench/results'), { recursive: true });
  // BENCH_RESULT_FILE: the swarm benchmark runs this one as its docker-driver baseline.
  writeFileSync(process.env.BENCH_RESULT_FILE ?? path.join(repo, 'bench/results/instances.json'), `${JSON.stringify(result, null, 2)}\n`);
  if (result.failures || result.port_collisions) exitCode = 1;
} catch (err) {
  log(`failed: ${(err as Error).stack ?? err}`);
  exitCode = 1;
} finally {
  await nc.drain().catch(() => {});
  await stack.stop().catch((err: unknown) => log(`stopping the stack: ${(err as Error).message}`));
  // Everything this run made in Docker and the host firewall, whatever happened above.
  for (const label of [`agenthost.scope=${provNetwork}`, bareLabel]) {
    const ids = (await dockerQuiet('ps', '-aq', '--filter', `label=${label}`)).split('\n').filter(Boolean);
    if (ids.length) await dockerQuiet('rm', '-f', '-v', ...ids);
    const vols = (await dockerQuiet('volume', 'ls', '-q', '--filter', `label=${label}`)).split('\n').filter(Boolean);
    if (vols.length) await dockerQuiet('volume', 'rm', '-f', ...vols);
  }
  for (const net of [provNetwork, bareNetwork]) {
    for (let i = 0; i < 5 && (await dockerQuiet('network', 'inspect', net)); i++) {
      await dockerQuiet('network', 'rm', net);
      await sleep(500);
    }
    if (await dockerQuiet('network', 'inspect', net)) log(`could not remove network ${net}`);
  }
  await removeFirewall(firewallTag(provNetwork)).catch(() => 0);
}
process.exit(exitCode);
