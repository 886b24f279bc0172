// Benchmark: the real OpenClaw image (issues #17, #33). In one run, against baselines measured in the same run:
//   1. create → running through the provisioner vs a bare `docker run` of the same image with the plain
//      `openclaw gateway` command and the same limits, and the peer `openclaw fleet create` (one at a time);
//   2. 5 concurrent creates through the provisioner (the only step with more than 2 agents at once);
//   3. restart of a stopped instance container → first /readyz 200 (what a wake costs at least);
//   4. idle memory per instance after BENCH_IDLE_S (60) s: RSS and where it goes (/proc/<pid>/smaps_rollup), and the
//      gateway's start profile from its log lines;
//   5. per sleep depth (light on free and on pro's limits, deep on pro's): time to sleep, host memory held asleep,
//      wake → first byte through the edge; and the freeze floor (docker pause → unpause → first byte);
//   6. the checkpointed deep sleep (docs/decisions/0049-...; checkpointing.ts), on pro's and free's limits, against
//      the `stopped` deep sleep of step 5 and the restart floor of step 3; its image's size; the first turn after it;
//   7. density: BENCH_DENSITY (12) free instances put to sleep checkpointed, at most BENCH_DENSITY_STAGGER (3)
//      booting at once; host memory per agent asleep (density.ts);
//   8. creates served by the warm pool, pro and free (pool.ts), against step 1's boots and bare runs.
// Targets: targets.ts. Usage: bash bench/run.sh openclaw (or node bench/openclaw/run.ts with the infra env loaded).
// Results: bench/results/openclaw.json.

import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadInfraEnv } from '../../packages/testkit/src/infra-env.ts';
import { bareRun, docker, dockerQuiet, memoryOf, readyz, removeBare, removeLabelled, sleep, startProfile } from './container.ts';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
loadInfraEnv();
const { spawnService, startEdge, startStack, testAsserter } = await import('../../packages/testkit/src/index.ts');
const { wakeAtDepth } = await import('./wake.ts');
const { densityRun } = await import('./density.ts');
const { checkpointingProvisioner, checkpointedRow } = await import('./checkpointing.ts');
const { warmPoolCreates } = await import('./pool.ts');
const { fleetCreate, prepareFleet } = await import('./fleet.ts');
const { targets, targetsMet } = await import('./targets.ts');
const { firstTurns } = await import('./turn.ts');
const { request, DEFAULT_TIERS: TIERS } = await import('../../packages/shared/src/index.ts');
const { firewallTag, removeFirewall } = await import('../../services/provisioner/src/docker/firewall.ts');
const { heapMb } = await import('../../services/provisioner/src/docker/spec.ts');
type Nc = Parameters<typeof request>[0];

const num = (name: string, def: number) => Number(process.env[name] ?? def);
const ROUNDS = num('BENCH_ROUNDS', 3);
const CONCURRENT = num('BENCH_CONCURRENCY', 5);
const IDLE_S = num('BENCH_IDLE_S', 60);
const WAKE_IDLE_S = num('BENCH_WAKE_IDLE_S', 5);
const DENSITY = num('BENCH_DENSITY', 12);
const DENSITY_STAGGER = num('BENCH_DENSITY_STAGGER', 3);
const TURN_ROUNDS = num('BENCH_TURN_ROUNDS', ROUNDS);
const DEEP_ROUNDS = num('BENCH_DEEP_ROUNDS', ROUNDS);
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
// The checkpointing provisioner's sealed images: <dir>/<scope>/<instance id> (root only), removed at the end.
const CHECKPOINT_DIR = `/var/lib/agenthost-bench-oc-${tag}`;
const checkpointScope = path.join(CHECKPOINT_DIR, provNetwork);
// Calls for a user carry the gateway's assertion, as the gateway's own do.
const asserter = testAsserter();

const log = (msg: string) => process.stderr.write(`[bench:openclaw] ${msg}\n`);

const { pct, stats, createMany, removeAll } = await import('./creates.ts');
const createAndWait = (nc: Nc, user_id: string, n: number) => createMany({ nc, asserter, log, tier: TIER }, user_id, n);
const remove = (nc: Nc, user_id: string, ids: string[]) => removeAll({ nc, asserter }, user_id, ids);

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
      // Sleep, for the wake rows (pro never sleeps): free, with its own limits, sleeps lightly after WAKE_IDLE_S;
      // enterprise, with pro's limits, lightly after WAKE_IDLE_S and deeply 25 s later.
      TIER_LIMITS_JSON: JSON.stringify({ [TIER]: LIMITS, enterprise: LIMITS, free: { instances: DENSITY + 2 } }),
      SLEEP_AFTER_IDLE_SECONDS_JSON: JSON.stringify({ free: WAKE_IDLE_S, pro: 0, enterprise: WAKE_IDLE_S }),
      DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON: JSON.stringify({ free: 0, pro: 0, enterprise: WAKE_IDLE_S + 25 }),
      // The `stopped` deep sleep first; the checkpointing provisioner replaces this one for step 6.
      SLEEP_CHECKPOINT: 'off',
      SLEEP_CHECK_INTERVAL_SECONDS: '1',
      INSTANCE_URL_TEMPLATE: 'https://{id}.agenthost.localhost:19496',
      // The turn rows' stub model provider listens on this host: the host firewall lets instances reach only the gateway.
      FIREWALL: 'off',
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
let checkpointing: Awaited<ReturnType<typeof spawnService>> | undefined;
try {
  const bare: number[] = [];
  const prov: number[] = [];
  let failures = 0;
  const profiles: Record<string, unknown> = {};
  // The peer: OpenClaw's own `openclaw fleet create` of the same build (fleet.ts), on the bare runs' port.
  const fleetCli = await prepareFleet(IMAGE, log);
  const fleet: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // Alternating order, one agent at a time: drift weighs on both sides alike.
    const phases = [
      async () => {
        const name = `ah-bench-oc-${tag}-${r}`;
        const t0 = performance.now();
        await bareRun({ name, port: BARE_PORT, label: bareLabel, limits: LIMITS, image: IMAGE, token: TOKEN, heapMb: heapMb(LIMITS.memory_mb) });
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
      async () => {
        const ms = await fleetCreate(fleetCli, { tenant: `ah-bench-${tag}-${r}`, port: BARE_PORT, ...LIMITS, memoryMb: LIMITS.memory_mb });
        if (ms === undefined) failures++;
        else fleet.push(ms);
      },
    ];
    for (const phase of r % 2 ? phases.reverse() : phases) await phase();
    log(
      `round ${r + 1}/${ROUNDS}: bare ${Math.round(bare.at(-1) ?? NaN)} ms, provisioner ${Math.round(prov.at(-1) ?? NaN)} ms, fleet ${Math.round(fleet.at(-1) ?? NaN)} ms`,
    );
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
  // The freeze floor: the cgroup freezer alone, pause → unpause → the agent's first byte, straight to its port.
  const freeze: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    await docker('pause', `agenthost-${id}`);
    const t0 = performance.now();
    await docker('unpause', `agenthost-${id}`);
    const r0 = await fetch(`http://127.0.0.1:${port}/`).catch(() => undefined);
    await r0?.arrayBuffer();
    if (r0?.ok) freeze.push(performance.now() - t0);
    else failures++;
  }
  const wake: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    await docker('stop', `agenthost-${id}`);
    const t0 = performance.now();
    await docker('start', `agenthost-${id}`);
    if (await readyz(port, Date.now() + 240_000)) wake.push(performance.now() - t0);
    else failures++;
  }
  await remove(nc, user_id, one.ids);

  log(`wake through the edge per sleep depth: asleep after ${WAKE_IDLE_S} s idle, then one request wakes it (${ROUNDS} rounds each)`);
  const lines = () => stack.services.get('provisioner')!.lines();
  const light = (await import('../../services/provisioner/src/docker/swap.ts')).hostSwap().usable ? ('swapped' as const) : ('frozen' as const);
  const depth = async (tier: 'free' | 'enterprise', d: 'frozen' | 'swapped' | 'stopped') => {
    const w = await wakeAtDepth({ nc, edge, asserter, rounds: ROUNDS, tier, depth: d, lines, log });
    failures += w.failures;
    return { depth: d, time_to_sleep_ms: stats(w.toSleep), asleep_held_mb: Math.round(Math.max(...w.held)), wake_to_first_byte_ms: stats(w.wake) };
  };
  const baseRows = { light_free: await depth('free', light), light_pro: await depth('enterprise', light), deep_pro: await depth('enterprise', 'stopped') };

  log('the first agent turn after a light sleep, against the first turn of an agent that never slept (stub model)');
  // A phase that fails is counted and logged; the rows measured before it are still written.
  const noTurns = (err: Error) => {
    log(`first turns failed: ${err.message.slice(0, 300)}`);
    return { never: [] as number[], woken: [] as number[], awake: [] as number[], failures: 1 };
  };
  const noDensity = (err: Error) => {
    log(`density failed: ${err.message.slice(0, 300)}`);
    failures++;
    return undefined;
  };
  const turnOpts = { nc, edge, asserter, rounds: TURN_ROUNDS, tier: 'enterprise' as const, log };
  const turns = await firstTurns(turnOpts).catch(noTurns);
  failures += turns.failures;

  // Step 6: the same stack's provisioner replaced by one that checkpoints (every instance of the first is removed).
  log('replacing the provisioner by one with a CHECKPOINT_KEY: the deep sleep checkpoints');
  const cpOpts = { stack, spawnService, checkpointDir: CHECKPOINT_DIR, idleS: WAKE_IDLE_S, log };
  checkpointing = await checkpointingProvisioner(cpOpts);
  const checkpointed = async (tier: 'free' | 'enterprise') => {
    const w = await wakeAtDepth({ nc, edge, asserter, rounds: DEEP_ROUNDS, tier, depth: 'checkpointed', checkpointDir: checkpointScope, lines: ckLines, log });
    failures += w.failures;
    return checkpointedRow(w, pct(wake, 50));
  };
  const ckLines = () => checkpointing!.lines();
  const sleepRows = { ...baseRows, deep_checkpointed_pro: await checkpointed('enterprise'), deep_checkpointed_free: await checkpointed('free') };

  log('the first agent turn after a checkpointed wake, against the first turn of an agent that never slept (stub model)');
  const ckTurns = await firstTurns({ ...turnOpts, depth: 'checkpointed', checkpointDir: checkpointScope }).catch(noTurns);
  failures += ckTurns.failures;

  log(`density: ${DENSITY} free instances (at most ${DENSITY_STAGGER} booting at once), asleep checkpointed; host memory per agent`);
  const densityOpts = { nc, asserter, count: DENSITY, depth: 'checkpointed' as const, stagger: DENSITY_STAGGER, checkpointDir: checkpointScope };
  const density = DENSITY > 0 ? await densityRun({ ...densityOpts, lines: ckLines, log }).catch(noDensity) : undefined;

  log(`warm pool: one checkpointed agent per tier kept; ${ROUNDS} creates per tier claim it, each once it has refilled`);
  const tiers = { [TIER]: LIMITS, free: TIERS.free };
  const poolOpts = { scope: provNetwork, checkpointScope, tiers, rounds: ROUNDS, create: { nc, asserter, log }, user_id, log };
  const pool = await warmPoolCreates({ ...poolOpts, replaceProvisioner: (env) => checkpointingProvisioner({ ...cpOpts, env, label: 'provisioner-pool' }) });
  checkpointing = pool.service;
  failures += pool.failures;

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
    // The peer row: `openclaw fleet create` of the same build → first /readyz 200 (fleet.ts).
    peer_openclaw_fleet_create_to_ready_ms: { ...stats(fleet), ratio_p50_to_bare: Math.round((pct(fleet, 50) / b.p50) * 100) / 100 },
    // A create served by the warm pool (WARM_POOL_JSON), per tier, and its ratio to the same run's bare `docker run`.
    warm_pool_create_to_running_ms: pool.rows,
    warm_pool_ratio_p50: Math.round(((pool.rows[TIER]?.p50 ?? NaN) / b.p50) * 100) / 100,
    concurrent_creates_to_running_ms: { concurrency: CONCURRENT, ...stats(burst.ms) },
    restart_to_ready_ms: stats(wake),
    freeze_floor_ms: stats(freeze),
    // The default tier's (free) depth: a light sleep.
    wake_to_first_byte_ms: sleepRows.light_free.wake_to_first_byte_ms,
    asleep_held_mb: sleepRows.light_free.asleep_held_mb,
    wake_ratio_to_restart_p50: Math.round((sleepRows.light_free.wake_to_first_byte_ms.p50 / pct(wake, 50)) * 100) / 100,
    // The default tier's (free) deep sleep, where checkpointing is on: checkpointed (deep_pro is the same step without it: stopped).
    deep_sleep: {
      depth: 'checkpointed',
      tier: 'free',
      wake_to_first_byte_ms: sleepRows.deep_checkpointed_free.wake_to_first_byte_ms,
      asleep_held_mb: sleepRows.deep_checkpointed_free.asleep_held_mb,
      image_mb: sleepRows.deep_checkpointed_free.image_mb,
      wake_ratio_to_restart_p50: sleepRows.deep_checkpointed_free.wake_ratio_to_restart_p50,
    },
    sleep_depths: sleepRows,
    first_turn_ms: { never_slept: stats(turns.never), after_light_wake: stats(turns.woken), awake: stats(turns.awake) },
    first_turn_checkpointed_ms: { never_slept: stats(ckTurns.never), after_checkpointed_wake: stats(ckTurns.woken), awake: stats(ckTurns.awake) },
    idle_memory_after_s: IDLE_S,
    idle_memory: idle,
    instances_per_gib_by_idle_rss: Math.round((1024 / Math.max(1, idle.rss_mb)) * 10) / 10,
    density,
    start_profile_ms: profiles,
    failures,
    // Issue 33's targets, on this 2-core machine (targets.ts).
    targets,
    targets_met: targetsMet({ sleepRows, createP50: p.p50, pool: pool.rows, idleRss: idle.rss_mb }),
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
  await checkpointing?.stop().catch(() => {});
  await edge.stop().catch(() => {});
  await stack.stop().catch((err: unknown) => log(`stopping the stack: ${(err as Error).message}`));
  await removeLabelled([`agenthost.scope=${provNetwork}`, bareLabel]);
  await dockerQuiet('network', 'rm', provNetwork);
  await removeFirewall(firewallTag(provNetwork)).catch(() => 0);
  rmSync(CHECKPOINT_DIR, { recursive: true, force: true });
}
process.exit(exitCode);
