import { createServer } from 'node:http';
import { observeSent } from '../../packages/shared/src/index.ts';
import { observeRequest, startHttpSpan } from '../../services/gateway/src/http/observe.ts';
import { alternate, type Comparison } from './ab.ts';
import { report } from './load.ts';

// The cost of metrics and tracing (packages/shared/src/observe), in the same run: a gateway with its operator
// port open (scraped before each of its slices, far more often than Prometheus would) and traces exported over
// OTLP at the default sampling, against the benchmarked gateway with neither. Same client, same billing-chain,
// alternating slices. The request counters themselves run in both (they are not switched off), so their cost is
// also measured in this process: the hooks one API request runs, against the CPU one request costs.

export interface ObservabilityCost {
  sample_ratio: string;
  on: ReturnType<typeof report>;
  off: ReturnType<typeof report>;
  throughput_cost_percent: number;
  throughput_cost_percent_paired_median: number;
  cpu_us_per_request: { on: Record<string, number>; off: Record<string, number> };
  in_process: { hooks_us: number; path_cpu_us: number; hooks_percent: number };
  target_percent: number;
  pass: boolean;
}

/** An OTLP endpoint that takes the spans and drops them (the collector is not what is measured). */
export async function otlpSink(): Promise<{ url: string; close(): void }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, close: () => server.close() };
}

export async function observabilityCost(o: Comparison & { metricsUrl: string; sampleRatio: string }): Promise<ObservabilityCost> {
  o.log(`metrics + tracing (sampling ${o.sampleRatio}) on against off: ${o.rounds} alternating slices of ${o.sliceMs / 1000}s each`);
  // The "on" gateway is scraped before each of its slices, far more often than Prometheus would.
  const ab = await alternate(o, async (side) => {
    if (side === 'on') await (await fetch(o.metricsUrl)).text();
  });
  const hooks = hooksMicros();
  const inProcess = { hooks_us: hooks, path_cpu_us: o.pathCpuUs, hooks_percent: Math.round((hooks / o.pathCpuUs) * 1000) / 10 };
  const cost = ab.costPercentPairedMedian;
  o.log(
    `observability on ${ab.on.rps} req/s, off ${ab.off.rps} req/s: cost ${ab.costPercent} % (paired median ${cost} %); cpu µs/request on ${JSON.stringify(ab.cpuUsPerRequest.on)}, off ${JSON.stringify(ab.cpuUsPerRequest.off)}`,
  );
  o.log(`in process: the metric hooks of one request ${hooks} µs, ${inProcess.hooks_percent} % of the ${o.pathCpuUs} µs of CPU one request costs`);
  return {
    sample_ratio: o.sampleRatio,
    on: report(ab.on),
    off: report(ab.off),
    throughput_cost_percent: ab.costPercent,
    throughput_cost_percent_paired_median: cost,
    cpu_us_per_request: ab.cpuUsPerRequest,
    in_process: inProcess,
    target_percent: 10,
    pass: cost <= 10,
  };
}

/** µs per request of what every API request runs for metrics (HTTP span and counters, the NATS client counters). */
function hooksMicros(): number {
  const one = () => {
    const traced = startHttpSpan('GET', 'bench-request-id');
    observeSent('billing.v1.subscription.status', 'OK', 0.0004);
    observeRequest(traced?.span, '/subscription/status', 'GET', 200, 0.0009);
  };
  const time = (n: number) => {
    const t = performance.now();
    for (let i = 0; i < n; i++) one();
    return Math.round(((performance.now() - t) * 1000 * 100) / n) / 100;
  };
  time(2_000); // warm
  return time(100_000);
}
