import { closedLoop, merge, report, type RunResult, type Target } from './load.ts';
import { cpuSeconds, type BenchProcess } from './processes.ts';

// The cost of the caller assertions (packages/shared/src/nats/assertion.ts), in the same run: the benchmarked
// gateway signs one per forwarded call and billing-chain verifies it; a second gateway started with
// ASSERTIONS=off (a switch for benchmarks only) sends none, so billing-chain has nothing to verify (its status
// subject takes an assertion when one comes). Same client, same billing-chain, alternating slices.

export interface AssertionCost {
  on: ReturnType<typeof report>;
  off: ReturnType<typeof report>;
  /** Throughput lost with assertions on, in per cent of the throughput without them. */
  throughput_cost_percent: number;
  /** CPU per request (µs) of the gateway and of billing-chain, on and off. */
  cpu_us_per_request: { on: Record<string, number>; off: Record<string, number> };
  target_percent: number;
  pass: boolean;
}

export async function assertionCost(o: {
  on: Target;
  off: Target;
  gatewayOn: BenchProcess;
  gatewayOff: BenchProcess;
  billingPid: number;
  connections: number;
  rounds: number;
  sliceMs: number;
  log: (msg: string) => void;
}): Promise<AssertionCost> {
  o.log(`assertions on against off: ${o.rounds} alternating slices of ${o.sliceMs / 1000}s each`);
  await closedLoop(o.off, o.connections, o.sliceMs); // warm the second gateway
  const parts = { on: [] as RunResult[], off: [] as RunResult[] };
  const cpu = { on: { gateway: 0, 'billing-chain': 0 }, off: { gateway: 0, 'billing-chain': 0 } };
  for (let i = 0; i < o.rounds; i++) {
    // Alternate which goes first, so a trend in background load does not favour one side.
    for (const side of i % 2 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
      const gw = side === 'on' ? o.gatewayOn : o.gatewayOff;
      const g0 = cpuSeconds(gw.pid);
      const b0 = cpuSeconds(o.billingPid);
      parts[side].push(await closedLoop(side === 'on' ? o.on : o.off, o.connections, o.sliceMs));
      cpu[side].gateway += cpuSeconds(gw.pid) - g0;
      cpu[side]['billing-chain'] += cpuSeconds(o.billingPid) - b0;
    }
  }
  const on = merge(parts.on);
  const off = merge(parts.off);
  const perRequest = (m: Record<string, number>, n: number) => Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Math.round((v / Math.max(1, n)) * 1_000_000)]));
  const cost = Math.round((1 - on.rps / off.rps) * 1000) / 10;
  const result = {
    on: report(on),
    off: report(off),
    throughput_cost_percent: cost,
    cpu_us_per_request: { on: perRequest(cpu.on, on.requests), off: perRequest(cpu.off, off.requests) },
    target_percent: 5,
    pass: cost <= 5,
  };
  o.log(`assertions on ${on.rps} req/s, off ${off.rps} req/s: cost ${cost} %; cpu µs/request on ${JSON.stringify(result.cpu_us_per_request.on)}, off ${JSON.stringify(result.cpu_us_per_request.off)}`);
  return result;
}
