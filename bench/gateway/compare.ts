// The gateway against its baselines in this run (the bare server, the floor relay, and BENCH_BASE_REPO's gateway
// when given), in alternating slices so that a change in background load hits every side alike. run.ts starts
// the processes and writes the results.
import { closedLoop, merge, openLoop, pairedAdded, r3, report, type RunResult, type Target } from './load.ts';

/**
 * The relays measured beside the gateway, by name: `floor` (floor.ts: node:http → NATS → echo) and `floor-express`
 * (express-floor.ts: the same relay on Express with the gateway's body parser, routes and pino access line).
 */
export type Floors = { floor: Target } & Record<string, Target>;
const FLOOR_NAMES: Record<string, string> = {
  floor: 'floor relay (no auth, quota, logs or validation)',
  'floor-express': 'Express floor relay (Express 5, the body parser, the routes and a pino access line; nothing else)',
};

/**
 * Round i runs the sides in the order of round 0 rotated by i, so each side follows each other one as often: a
 * slice pays for what the slice before it left (the load generator's own garbage after the bare server's 18,000
 * requests/s), and in a fixed order that cost always fell on the side after the bare server. Fairer, but not the
 * whole story: two gateways of the same code differed by 9 % in a fixed order and by 10 % rotated (bench/gateway/README.md).
 */
const rotated = <T>(xs: T[], i: number): T[] => [...xs.slice(i % xs.length), ...xs.slice(0, i % xs.length)];

interface Sides {
  baseline: Target;
  gateway: Target;
  before: Target | undefined;
  /** Counts the requests the gateways served, for the usage writes per request. */
  onGateway: (r: RunResult) => RunResult;
  log: (msg: string) => void;
}

/**
 * Max throughput, and the CPU time each meter (a process, Postgres, the whole machine: CPU seconds so far) spends per
 * request, to show where the time goes. `other` is the machine's busy time no meter names (the kernel's network
 * work outside any process, the idle services' timers).
 */
export async function maxThroughput(
  o: Sides & { meters: Record<string, () => number>; connections: number; rounds: number; sliceMs: number; baseRepo: string | undefined; floors: Floors },
) {
  const { baseline, gateway, before, onGateway, log, meters, floors } = o;
  log(`max throughput: ${o.connections} connections, ${o.rounds} alternating slices of ${o.sliceMs / 1000}s each`);
  const bareParts: RunResult[] = [];
  const gwParts: RunResult[] = [];
  const beforeParts: RunResult[] = [];
  const floorParts: Record<string, RunResult[]> = Object.fromEntries(Object.keys(floors).map((n) => [n, []]));
  const cpu = (): Record<string, number> => Object.fromEntries(Object.entries(meters).map(([k, read]) => [k, read()]));
  const spent = {
    bare: {} as Record<string, number>,
    gateway: {} as Record<string, number>,
    before: {} as Record<string, number>,
  };
  const floorSpent: Record<string, Record<string, number>> = Object.fromEntries(Object.keys(floors).map((n) => [n, {}]));
  const add = (into: Record<string, number>, a: Record<string, number>, b: Record<string, number>) => {
    for (const k of Object.keys(a)) into[k] = (into[k] ?? 0) + (b[k]! - a[k]!);
  };
  const slice = async (target: Target, into: RunResult[], spentOn: Record<string, number>, counted = false) => {
    const c0 = cpu();
    const r = await closedLoop(target, o.connections, o.sliceMs);
    into.push(counted ? onGateway(r) : r);
    add(spentOn, c0, cpu());
  };
  const sides = [
    () => slice(baseline, bareParts, spent.bare),
    () => slice(gateway, gwParts, spent.gateway, true),
    ...Object.entries(floors).map(
      ([name, floor]) =>
        () =>
          slice(floor, floorParts[name]!, floorSpent[name]!),
    ),
    ...(before ? [() => slice(before, beforeParts, spent.before, true)] : []),
  ];
  for (let i = 0; i < o.rounds; i++) for (const side of rotated(sides, i)) await side();
  const bareMax = merge(bareParts);
  const gwMax = merge(gwParts);
  const ratio = gwMax.rps / bareMax.rps;
  const perRequest = (m: Record<string, number>, n: number) => {
    const us: Record<string, number> = Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Math.round((v / n) * 1_000_000)]));
    if (us.machine !== undefined) us.other = us.machine - Object.entries(us).reduce((t, [k, v]) => (k === 'machine' ? t : t + v), 0);
    return us;
  };
  const beforeMax = before && merge(beforeParts);
  const floorMax: Record<string, RunResult> = Object.fromEntries(Object.entries(floorParts).map(([n, parts]) => [n, merge(parts)]));
  const cpuUsPerRequest: { bare: Record<string, number>; gateway: Record<string, number> } & Record<string, Record<string, number>> = {
    bare: perRequest(spent.bare, bareMax.requests),
    gateway: perRequest(spent.gateway, gwMax.requests),
    ...(beforeMax ? { before: perRequest(spent.before, beforeMax.requests) } : {}),
    ...Object.fromEntries(Object.entries(floorMax).map(([n, r]) => [n, perRequest(floorSpent[n]!, r.requests)])),
  };
  log(`cpu µs per request: bare ${JSON.stringify(cpuUsPerRequest.bare)}, gateway ${JSON.stringify(cpuUsPerRequest.gateway)}`);
  log(`bare ${bareMax.rps} req/s, gateway ${gwMax.rps} req/s, ratio ${ratio.toFixed(3)}`);
  if (beforeMax)
    log(
      `before (${o.baseRepo}): gateway ${beforeMax.rps} req/s, ratio ${(beforeMax.rps / bareMax.rps).toFixed(3)}, cpu µs per request ${JSON.stringify(cpuUsPerRequest.before)}`,
    );
  for (const [name, r] of Object.entries(floorMax))
    log(`${FLOOR_NAMES[name] ?? name}: ${r.rps} req/s, ratio ${(r.rps / bareMax.rps).toFixed(3)}, cpu µs per request ${JSON.stringify(cpuUsPerRequest[name])}`);
  return { bareMax, gwMax, beforeParts, beforeMax, floorMax, ratio, cpuUsPerRequest };
}

/** Diagnostics: the latency of the bare server and of the gateway at each rate, one slice each. */
export async function latencyAtRates(o: Sides, rates: number[], sliceMs: number): Promise<void> {
  for (const rate of rates) {
    const b = await openLoop(o.baseline, rate, sliceMs);
    const g = o.onGateway(await openLoop(o.gateway, rate, sliceMs));
    o.log(
      `rate ${rate}: bare p50 ${b.latencyMs.p50} p99 ${b.latencyMs.p99} max ${b.latencyMs.max} | gateway p50 ${g.latencyMs.p50} p99 ${g.latencyMs.p99} max ${g.latencyMs.max}`,
    );
  }
}

/** The latency the gateway adds at a fixed rate (half its max), over the bare server and over the floor relay. */
export async function halfLoad(o: Sides & { floors: Floors; rate: number; rounds: number; sliceMs: number }) {
  const { baseline, gateway, before, floors, onGateway, log, rate: half } = o;
  const { floor, ...others } = floors;
  log(`half load: ${half} req/s open loop, ${o.rounds} alternating slices of ${o.sliceMs / 1000}s each`);
  const bareHalfParts: RunResult[] = [];
  const gwHalfParts: RunResult[] = [];
  const floorHalfParts: RunResult[] = [];
  const beforeHalfParts: RunResult[] = [];
  const otherHalfParts: Record<string, RunResult[]> = Object.fromEntries(Object.keys(others).map((n) => [n, []]));
  for (const f of Object.values(floors)) await openLoop(f, half, o.sliceMs);
  const slice = async (target: Target, into: RunResult[], counted = false) => {
    const r = await openLoop(target, half, o.sliceMs);
    into.push(counted ? onGateway(r) : r);
  };
  const sides = [
    () => slice(baseline, bareHalfParts),
    () => slice(gateway, gwHalfParts, true),
    () => slice(floor, floorHalfParts),
    ...Object.entries(others).map(
      ([name, f]) =>
        () =>
          slice(f, otherHalfParts[name]!),
    ),
    ...(before ? [() => slice(before, beforeHalfParts, true)] : []),
  ];
  for (let i = 0; i < o.rounds; i++) for (const side of rotated(sides, i)) await side();
  // What each other floor adds over the plain one (the Express floor: what the libraries alone cost in the tail).
  const othersOverFloor = Object.fromEntries(
    Object.entries(otherHalfParts).map(([name, parts]) => [name, { ...report(merge(parts)), added_over_floor_ms: pairedAdded(parts, floorHalfParts) }]),
  );
  for (const [name, r] of Object.entries(othersOverFloor))
    log(
      `${name} at half load: p99 ${r.latencyMs.p99} ms; added over the floor relay: median of paired slices p50 ${r.added_over_floor_ms.p50} ms, p99 ${r.added_over_floor_ms.p99} ms`,
    );
  const bareHalf = merge(bareHalfParts);
  const gwHalf = merge(gwHalfParts);
  // Pooled over all slices, and the median over adjacent (bare, gateway) slice pairs (pairedAdded says why).
  const pooled = { p50: r3(gwHalf.latencyMs.p50 - bareHalf.latencyMs.p50), p99: r3(gwHalf.latencyMs.p99 - bareHalf.latencyMs.p99) };
  const paired = pairedAdded(gwHalfParts, bareHalfParts);
  const overFloor = pairedAdded(gwHalfParts, floorHalfParts);
  const beforeOverFloor = before && pairedAdded(beforeHalfParts, floorHalfParts);
  // The targets of #31: what the gateway adds over the Express floor (the same libraries doing nothing else), as the
  // median of paired slices, the figure that survives a burst of foreign load in one slice on this shared machine.
  const express = otherHalfParts['floor-express'];
  const overExpress = express && { gateway: pairedAdded(gwHalfParts, express), before: before ? pairedAdded(beforeHalfParts, express) : undefined };
  if (overExpress)
    log(`p99 added over the Express floor at half load (paired median): gateway ${overExpress.gateway.p99} ms, before ${overExpress.before?.p99 ?? '-'} ms`);
  if (beforeOverFloor) log(`before: added over the floor relay at half load p50 ${beforeOverFloor.p50} ms, p99 ${beforeOverFloor.p99} ms`);
  log(
    `added over the floor relay at half load: median of paired slices p50 ${overFloor.p50} ms, p99 ${overFloor.p99} ms (floor p99 ${merge(floorHalfParts).latencyMs.p99} ms)`,
  );
  log(`added latency at half load: median of paired slices p50 ${paired.p50} ms, p99 ${paired.p99} ms; pooled p50 ${pooled.p50} ms, p99 ${pooled.p99} ms`);
  log(`  per-slice p99 (ms): bare ${bareHalfParts.map((b) => b.latencyMs.p99).join(' ')} | gateway ${gwHalfParts.map((g) => g.latencyMs.p99).join(' ')}`);
  return {
    bareHalfParts,
    gwHalfParts,
    floorHalfParts,
    beforeHalfParts,
    bareHalf,
    gwHalf,
    pooled,
    added: paired,
    overFloor,
    beforeOverFloor,
    othersOverFloor,
    overExpress,
  };
}
