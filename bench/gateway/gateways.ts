// The gateways the bench measures, all on the same NATS, database and billing-chain: the one under test, its
// twins for the cost of assertions and of observability, and BENCH_BASE_REPO's gateway when given. run.ts drives
// the load and stops them.
import { otlpSink } from './observability.ts';
import { type BenchProcess, spawnLogged } from './processes.ts';
import type { ApiClient } from '../../packages/testkit/src/http.ts';
import type { Session, Wallet } from '../../packages/testkit/src/wallet.ts';

export async function startGateways(o: {
  repo: string;
  /** BENCH_BASE_REPO: another checkout whose gateway joins every throughput and half-load slice (before and after in one run). */
  baseRepo: string | undefined;
  /** The whole gateway environment but what each gateway adds. */
  env: Record<string, string>;
  logDir: string;
  /** Every process started is pushed here, for run.ts to stop. */
  procs: BenchProcess[];
  freePort: () => Promise<number>;
}) {
  const args = (name: string) => (process.env[name] ?? '').split(' ').filter(Boolean);
  const spawnGateway = async (label: string, extra: Record<string, string>, execArgv: string[] = []) => {
    const p = await spawnLogged(o.repo, 'gateway', { ...o.env, ...extra }, o.logDir, label, execArgv);
    o.procs.push(p);
    return p;
  };
  // Diagnostics, e.g. BENCH_GATEWAY_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" or "--trace-gc".
  const gw = await spawnGateway('gateway', {}, args('BENCH_GATEWAY_NODE_ARGS'));
  // The same gateway without assertions, for their cost in this run (bench/gateway/assertions.ts).
  const gwOff = await spawnGateway('gateway-assertions-off', { ASSERTIONS: 'off' });
  // The same gateway with metrics served and traces exported (bench/gateway/observability.ts), at the default
  // sampling and with every request traced, against a twin without either started with them: a gateway started
  // minutes later than another costs a third more CPU per request for a while (its code is less optimised yet),
  // so each side of a comparison must be as warm as the other. BENCH_OBSERVED_NODE_ARGS: diagnostics for these.
  const sink = await otlpSink();
  const twin = async (label: string, extra: Record<string, string>) => {
    const metricsPort = await o.freePort();
    const observed = { METRICS_PORT: String(metricsPort), OTEL_EXPORTER_OTLP_ENDPOINT: sink.url };
    const p = await spawnGateway(label, { ...(label === 'gateway-plain' ? {} : observed), ...extra }, args('BENCH_OBSERVED_NODE_ARGS'));
    return { p, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics` };
  };
  const gwPlain = await twin('gateway-plain', {});
  const gwObserved = await twin('gateway-observed', {});
  const gwTraceAll = await twin('gateway-traced-all', { TRACE_SAMPLE_RATIO: '1' });
  const gwBase = o.baseRepo ? await spawnLogged(o.baseRepo, 'gateway', o.env, o.logDir, 'gateway-base') : undefined;
  if (gwBase) o.procs.push(gwBase);
  return { gw, gwOff, sink, gwPlain, gwObserved, gwTraceAll, gwBase };
}

/**
 * The calls the setup made through the gateway under test (sign-in, register, status), made through BENCH_BASE_REPO's
 * gateway too: V8 optimises a gateway's shared request path from the calls it has seen, so both should have seen the
 * same. Without them two gateways of the same code differed by 10 % in throughput and 20 % in CPU per request, the
 * one that had served the setup the slower; with them by 13 % in one run under heavy foreign load (README).
 */
export async function sameSetup(
  api: ApiClient,
  wallet: Wallet,
  txSignature: string,
  signIn: (api: ApiClient, wallet: Wallet) => Promise<Session>,
): Promise<void> {
  const s = await signIn(api, wallet);
  const r = await s.api.post('/subscription/register', { tx_signature: txSignature, tier: 1 });
  const g = await s.api.get('/subscription/status');
  if (r.status !== 200 || g.status !== 200) throw new Error(`the before gateway answered register ${r.status}, status ${g.status}`);
}
