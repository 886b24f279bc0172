// Benchmark: authenticated GET /api/subscription/status served from cache through
// gateway → NATS → billing-chain, against a bare node:http JSON server, the floor relay (floor.ts) and the Express
// floor (express-floor.ts), measured in the same slices with the same client. Usage: node bench/gateway/run.ts
//
// Targets (#31): throughput ≥ 0.75 of the Express floor's, and p99 added over it at half load ≤ 3 ms; also reported:
// the ratio to bare, the tail over the floors, usage writes per request. Results go to bench/results/gateway.json.

import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { assertionCost } from './assertions.ts';
import { edgeCost } from './edge.ts';
import { sameSetup, startGateways } from './gateways.ts';
import { observabilityCost } from './observability.ts';
import { halfLoad, latencyAtRates, maxThroughput } from './compare.ts';
import { startFloors } from './floors.ts';
import { closedLoop, merge, r3, report, type RunResult, type Target } from './load.ts';
import { cpuSeconds, cpuSecondsOf, machineCpuSeconds, spawnLogged, startBare, type BenchProcess } from './processes.ts';
import { usageWrites } from './usage-writes.ts';
import { loadInfraEnv } from '../../packages/testkit/src/infra-env.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');

// The servers deploy/infra.sh started.
loadInfraEnv();
const { apiClient, busKeys, createDatabase, freePort, newSigningKeyPem, signIn, startNats, subscribe } = await import('../../packages/testkit/src/index.ts');
const { startDevchain } = await import('../../packages/devchain/src/index.ts');

const num = (name: string, def: number) => Number(process.env[name] ?? def);
const CONNECTIONS = num('BENCH_CONNECTIONS', 32);
const DURATION_MS = num('BENCH_SECONDS', 10) * 1000;
/** The two targets are measured in alternating slices, so a change in background load hits both alike. */
const SLICE_MS = num('BENCH_SLICE_SECONDS', 2) * 1000;
const ROUNDS = Math.max(1, Math.round(DURATION_MS / SLICE_MS));
const HALF_SLICE_MS = 1000;
const ROUNDS_HALF = Math.max(3, Math.round(DURATION_MS / HALF_SLICE_MS)) | 1;
const WARMUP_MS = num('BENCH_WARMUP_SECONDS', 2) * 1000;
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'info';

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
log('starting nats, database, devchain, auth, billing-chain, gateway');
const nats = await startNats();
const db = await createDatabase('bench');
const devchain = await startDevchain({ host: '127.0.0.1', port: 0 });
const env: Record<string, string> = {
  NATS_URL: nats.url,
  LOG_LEVEL,
  SOLANA_RPC_URL: devchain.url,
  SUBSCRIPTION_PROGRAM_ID: devchain.config.programId,
  TREASURY: devchain.config.treasury,
  BACKGROUND_JOBS: 'false',
  AUTH_JWT_PRIVATE_KEY: newSigningKeyPem(),
  GATEWAY_ASSERTION_PUBLIC_KEYS: busKeys().assertionPublic,
  KEYVAULT_SEAL_PUBLIC_KEY: busKeys().sealPublic,
  // BENCH_OTLP: every service's sampled traces go to hops.ts (where the tail goes, per hop).
  ...(process.env.BENCH_OTLP ? { OTEL_EXPORTER_OTLP_ENDPOINT: process.env.BENCH_OTLP, OTEL_BSP_SCHEDULE_DELAY: '1000' } : {}),
  TIER_LIMITS_JSON: JSON.stringify({ pro: { requests_per_day: 1_000_000_000, requests_per_minute: 1_000_000_000 } }), // every request counted
};
const logDir = path.join(repo, '.test-logs', 'bench');
const procs: BenchProcess[] = [];
const [auth, billing] = await Promise.all([
  spawnLogged(repo, 'auth', { ...env, ...nats.envFor('auth'), DATABASE_URL: db.urlFor('auth') }, logDir),
  spawnLogged(
    repo,
    'billing-chain',
    { ...env, ...nats.envFor('billing-chain'), DATABASE_URL: db.urlFor('billing-chain') },
    logDir,
    'billing-chain',
    (process.env.BENCH_BILLING_NODE_ARGS ?? '').split(' ').filter(Boolean),
  ),
]);
procs.push(auth, billing);
const baseRepo = process.env.BENCH_BASE_REPO;
const { gw, gwOff, sink, gwPlain, gwObserved, gwTraceAll, gwBase } = await startGateways({
  repo,
  baseRepo,
  env: {
    ...env,
    ...nats.envFor('gateway'),
    DATABASE_URL: db.urlFor('gateway'),
    GATEWAY_HOST: '127.0.0.1',
    GATEWAY_PORT: '0',
    GATEWAY_ASSERTION_PRIVATE_KEY: busKeys().assertionPem,
  },
  logDir,
  procs,
  freePort,
});
const baseUrl = `${String(gw.ready.url)}/api`;
const stack = {
  api: apiClient(baseUrl),
  baseUrl,
  chain: {
    url: devchain.url,
    programId: devchain.config.programId,
    treasury: devchain.config.treasury,
    prices: { ...devchain.config.prices },
    advanceClock: async (s: number) => devchain.advanceClock(s),
    now: async () => devchain.now(),
    close: () => devchain.close(),
  },
};
const bare = await startBare(); // and the floors (floors.ts), measured in the same slices as the gateway
const { floors, pids: floorPids, stop: stopFloors } = await startFloors({ ...process.env, ...nats.envFor('operator') }, logDir);
let exitCode = 0;
try {
  const session = await signIn(stack.api);
  const subscribed = await subscribe(stack, session, { tier: 'pro' });
  const gateway: Target = { url: `${stack.baseUrl}/subscription/status`, headers: { authorization: `Bearer ${session.token}` } };
  const baseline: Target = { url: bare.url, headers: gateway.headers };
  const before: Target | undefined = gwBase && { ...gateway, url: `${String(gwBase.ready.url)}/api/subscription/status` };
  const check = await session.api.get('/subscription/status');
  if (check.status !== 200) throw new Error(`status answered ${check.status}: ${check.text}`);
  if (gwBase) await sameSetup(apiClient(`${String(gwBase.ready.url)}/api`), session.wallet, subscribed.tx_signature, signIn);

  const writesBefore = await usageWrites(db.url);
  const leaseWritesBefore = await usageWrites(db.url, 'usage_leases');
  let gatewayRequests = 0;
  const onGateway = (r: RunResult) => {
    gatewayRequests += r.requests + r.errors;
    return r;
  };

  log(`warm-up ${WARMUP_MS / 1000}s each`);
  await closedLoop(baseline, CONNECTIONS, WARMUP_MS);
  onGateway(await closedLoop(gateway, CONNECTIONS, WARMUP_MS));
  for (const f of Object.values(floors)) await closedLoop(f, CONNECTIONS, WARMUP_MS);
  if (before) onGateway(await closedLoop(before, CONNECTIONS, WARMUP_MS));

  // What maxThroughput measures the CPU time per request of: each process on the path, Postgres (the gateway's
  // served counts), and the whole machine.
  const of = (pid: number) => () => cpuSeconds(pid);
  const meters: Record<string, () => number> = {
    client: of(process.pid),
    bare: of(bare.pid),
    gateway: of(gw.pid),
    'billing-chain': of(billing.pid),
    'nats-server': of(nats.pid()!),
    ...(gwBase ? { before: of(gwBase.pid) } : {}),
    ...Object.fromEntries(Object.entries(floorPids).map(([name, pid]) => [name, of(pid)])),
    postgres: () => cpuSecondsOf('postgres'),
    machine: machineCpuSeconds,
  };
  const sides = { baseline, gateway, before, onGateway, log };
  const { bareMax, gwMax, beforeParts, beforeMax, floorMax, ratio, cpuUsPerRequest } = await maxThroughput({
    ...sides,
    meters,
    floors,
    connections: CONNECTIONS,
    rounds: ROUNDS,
    sliceMs: SLICE_MS,
    baseRepo,
  });

  // Diagnostics: latency at given rates (comma-separated), alternating bare and gateway.
  if (process.env.BENCH_RATES) await latencyAtRates(sides, process.env.BENCH_RATES.split(',').map(Number), SLICE_MS);
  const half = Math.max(1, Math.round(gwMax.rps / 2));
  const hl = await halfLoad({ ...sides, floors, rate: half, rounds: ROUNDS_HALF, sliceMs: HALF_SLICE_MS });
  const { bareHalfParts, gwHalfParts, floorHalfParts, beforeHalfParts, bareHalf, gwHalf, overFloor, beforeOverFloor, overExpress } = hl;

  const expressRps = floorMax['floor-express']!.rps;
  const ratios = (rps: number) => ({ ratio: r3(rps / bareMax.rps), gateway_to_express_floor: r3(rps / expressRps) });
  const costs = async () => {
    const pathCpuUs = cpuUsPerRequest.gateway.gateway! + cpuUsPerRequest.gateway['billing-chain']! + cpuUsPerRequest.gateway['nats-server']!;
    const load = { billingPid: billing.pid, connections: CONNECTIONS, rounds: ROUNDS, sliceMs: SLICE_MS, pathCpuUs, log };
    const assertions = await assertionCost({
      ...load,
      on: { target: gateway, gateway: gw },
      off: { target: { ...gateway, url: `${String(gwOff.ready.url)}/api/subscription/status` }, gateway: gwOff },
    });
    gatewayRequests += assertions.on.requests + assertions.off.requests;

    const observe = async (g: { p: BenchProcess; metricsUrl: string }, sampleRatio: string) => {
      const r = await observabilityCost({
        ...load,
        on: { target: { ...gateway, url: `${String(g.p.ready.url)}/api/subscription/status` }, gateway: g.p },
        off: { target: { ...gateway, url: `${String(gwPlain.p.ready.url)}/api/subscription/status` }, gateway: gwPlain.p },
        metricsUrl: g.metricsUrl,
        sampleRatio,
      });
      gatewayRequests += r.on.requests + r.off.requests;
      return r;
    };
    const observability = { default_sampling: await observe(gwObserved, 'default (0.1)'), every_request_traced: await observe(gwTraceAll, '1') };
    // The same path through the HTTPS edge (Caddy), against the direct path, in this run.
    const edge = await edgeCost({
      direct: gateway,
      gatewayHost: new URL(String(gw.ready.url)).host,
      connections: CONNECTIONS,
      rounds: ROUNDS,
      sliceMs: SLICE_MS,
      log,
    });
    gatewayRequests += edge.max_throughput.direct.requests + edge.max_throughput.edge.requests + edge.half_load.direct.requests + edge.half_load.edge.requests;
    return { assertions, observability, edge };
  };
  // BENCH_QUICK=1: throughput and half-load latency only (the costs of assertions, observability and the edge are skipped).
  const { assertions, observability, edge } = process.env.BENCH_QUICK === '1' ? {} : await costs();

  // Stop the gateways: their database sessions end (so Postgres flushes their statistics) and they give
  // back their unused quota blocks (counted too).
  await Promise.all([gw.stop(), gwOff.stop(), gwPlain.p.stop(), gwObserved.p.stop(), gwTraceAll.p.stop()]);
  await new Promise((r) => setTimeout(r, 500));
  const writes = (await usageWrites(db.url)) - writesBefore;
  const writesPerRequest = writes / Math.max(1, gatewayRequests);
  log(`usage_counters writes: ${writes} for ${gatewayRequests} requests (${writesPerRequest.toExponential(2)} per request)`);
  // The served counts that make a killed replica's leases reclaimable: one UPDATE per group commit.
  const leaseWrites = (await usageWrites(db.url, 'usage_leases')) - leaseWritesBefore;
  log(`usage_leases row writes: ${leaseWrites} (${(leaseWrites / Math.max(1, gatewayRequests)).toExponential(2)} per request)`);

  const errors = [bareMax, gwMax, bareHalf, gwHalf, ...beforeParts, ...beforeHalfParts].reduce((n, r) => n + r.errors + r.non2xx, 0) + (edge?.errors ?? 0);
  const result = {
    benchmark: 'gateway: authenticated GET /api/subscription/status (JWT → cached entitlement → usage count → NATS → billing-chain cache)',
    when: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? '', node: process.version },
    settings: {
      connections: CONNECTIONS,
      duration_s: DURATION_MS / 1000,
      slice_s: SLICE_MS / 1000,
      warmup_s: WARMUP_MS / 1000,
      log_level: LOG_LEVEL,
      client: 'in-process node:http keep-alive, loopback',
    },
    max_throughput: {
      bare: report(bareMax),
      gateway: report(gwMax),
      cpu_us_per_request: cpuUsPerRequest,
      ratio: Math.round(ratio * 1000) / 1000,
      target: 0.33,
      pass: ratio >= 0.33,
      gateway_to_express_floor: r3(gwMax.rps / expressRps),
      ...(beforeMax ? { before: { repo: baseRepo, gateway: report(beforeMax), ...ratios(beforeMax.rps) } } : {}),
      // The least an HTTP → NATS → service relay costs here: the ceiling any gateway of this design can reach.
      floor: { relay: report(floorMax.floor!), ratio: r3(floorMax.floor!.rps / bareMax.rps) },
      // The same relay on the gateway's libraries (Express 5, its body parser and routes, a pino access line): the
      // ceiling of a gateway built on them that did nothing else.
      floor_express: { relay: report(floorMax['floor-express']!), ratio: r3(floorMax['floor-express']!.rps / bareMax.rps) },
    },
    half_load: {
      rate_rps: half,
      slices: ROUNDS_HALF,
      bare: report(bareHalf),
      gateway: report(gwHalf),
      added_ms: hl.added,
      added_ms_pooled: hl.pooled,
      floor: report(merge(floorHalfParts)),
      added_over_floor_ms: overFloor,
      ...(beforeOverFloor ? { before_added_over_floor_ms: beforeOverFloor } : {}),
      // #31's target: p99 added over the Express floor, median of paired slices (≤ 3 ms).
      p99_added_over_express_floor_ms: overExpress?.gateway.p99,
      ...(overExpress?.before ? { before: { p99_added_over_express_floor_ms: overExpress.before.p99 } } : {}),
      floor_express: hl.othersOverFloor['floor-express'],
      per_slice_p99_ms: {
        bare: bareHalfParts.map((b) => b.latencyMs.p99),
        gateway: gwHalfParts.map((g) => g.latencyMs.p99),
        floor: floorHalfParts.map((f) => f.latencyMs.p99),
      },
      target_p99_added_over_floor_ms: 1,
      pass: overFloor.p99 <= 1,
    },
    assertions,
    observability,
    edge,
    usage_counting: {
      gateway_requests: gatewayRequests,
      usage_counters_writes: writes,
      writes_per_request: writesPerRequest,
      pass: writesPerRequest < 0.05,
      usage_leases_row_writes: leaseWrites,
      usage_leases_row_writes_per_request: leaseWrites / Math.max(1, gatewayRequests),
    },
    errors,
  };
  mkdirSync(path.join(repo, 'bench/results'), { recursive: true });
  writeFileSync(path.join(repo, 'bench/results/gateway.json'), `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(
    `${JSON.stringify({ ratio: result.max_throughput.ratio, added_ms: hl.added, added_over_floor_ms: overFloor, writes_per_request: writesPerRequest, assertion_cost_percent: assertions?.throughput_cost_percent, observability_cost_percent: observability?.default_sampling.throughput_cost_percent_paired_median, edge_ratio: edge?.max_throughput.ratio, edge_added_ms: edge?.half_load.added_ms, errors }, null, 2)}\n`,
  );
  log('wrote bench/results/gateway.json');
  if (errors > 0) exitCode = 1;
} catch (err) {
  log(`failed: ${(err as Error).stack ?? String(err)}`);
  exitCode = 1;
} finally {
  bare.stop();
  stopFloors();
  sink.close();
  await Promise.all(procs.map((p) => p.stop()));
  await devchain.close();
  await nats.stop();
  await db.drop().catch(() => {});
}
process.exit(exitCode);
