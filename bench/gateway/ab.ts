import { closedLoop, merge, type RunResult, type Target } from './load.ts';
import { cpuSeconds, type BenchProcess } from './processes.ts';

// Two gateways that differ in one setting, measured against each other in the same run: same client, same
// backends, alternating slices (which goes first alternates too, so a trend in background load favours neither).

export interface Side {
  target: Target;
  gateway: BenchProcess;
}

export interface AbResult {
  on: RunResult;
  off: RunResult;
  /** Throughput lost with the setting on, in per cent of the throughput without it: pooled, and the median of adjacent slice pairs. */
  costPercent: number;
  costPercentPairedMedian: number;
  /** CPU per request (µs) of each gateway and of the shared backend. */
  cpuUsPerRequest: { on: Record<string, number>; off: Record<string, number> };
}

/** One comparison of the gateway benchmark: the two sides, the backend both call (billing-chain), the load. */
export interface Comparison {
  on: Side;
  off: Side;
  billingPid: number;
  connections: number;
  rounds: number;
  sliceMs: number;
  /** CPU µs one request costs gateway + billing-chain + nats-server (measured by the main benchmark). */
  pathCpuUs: number;
  log: (msg: string) => void;
}

export async function alternate(o: Comparison, beforeSlice?: (side: 'on' | 'off') => Promise<void>): Promise<AbResult> {
  // Warm both alike (a few thousand requests each), so neither is measured while its code is still being optimised.
  for (let i = 0; i < 2; i++) {
    await closedLoop(o.off.target, o.connections, o.sliceMs);
    await closedLoop(o.on.target, o.connections, o.sliceMs);
  }
  const parts = { on: [] as RunResult[], off: [] as RunResult[] };
  const cpu = { on: { gateway: 0, 'billing-chain': 0 }, off: { gateway: 0, 'billing-chain': 0 } };
  for (let i = 0; i < o.rounds; i++) {
    for (const side of i % 2 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
      const s = o[side];
      await beforeSlice?.(side);
      const g0 = cpuSeconds(s.gateway.pid);
      const b0 = cpuSeconds(o.billingPid);
      parts[side].push(await closedLoop(s.target, o.connections, o.sliceMs));
      cpu[side].gateway += cpuSeconds(s.gateway.pid) - g0;
      cpu[side]['billing-chain'] += cpuSeconds(o.billingPid) - b0;
    }
  }
  const on = merge(parts.on);
  const off = merge(parts.off);
  const perRequest = (m: Record<string, number>, n: number) =>
    Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Math.round((v / Math.max(1, n)) * 1_000_000)]));
  const pairs = parts.on.map((p, i) => 1 - p.rps / parts.off[i]!.rps).sort((a, b) => a - b);
  return {
    on,
    off,
    costPercent: Math.round((1 - on.rps / off.rps) * 1000) / 10,
    costPercentPairedMedian: Math.round(pairs[Math.floor(pairs.length / 2)]! * 1000) / 10,
    cpuUsPerRequest: { on: perRequest(cpu.on, on.requests), off: perRequest(cpu.off, off.requests) },
  };
}
