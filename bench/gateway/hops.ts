// Where the gateway's tail goes, per hop, from the traces the services already emit: an OTLP/HTTP (JSON) endpoint
// that keeps the spans of sampled requests and splits each GET /subscription/status into its hops.
//
//   node bench/gateway/hops.ts 18861 &                     # the collector (port in 18860-18879)
//   BENCH_OTLP=http://127.0.0.1:18861 BENCH_QUICK=1 node bench/gateway/run.ts
//   kill -USR2 %1                                        # (optional) forget what came so far: e.g. at "half load"
//   kill -INT %1                                         # prints the hops of the slowest 1 % and of all
//
// Hops of one request: `before_nats` (gateway: auth, entitlement, quota, the call's batching turn), `nats_transit`
// (the round trip less billing-chain's handler: nats-server, both sockets, and billing-chain's event loop before it
// gets to the message), `billing_handler` (billing-chain's endpoint span), `after_nats` (gateway: the status view, the
// wait for the served-count write, the answer), and the served-count write itself when this request's trace holds it.
import { createServer } from 'node:http';

interface Span {
  traceId: string;
  name: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
}
type Hops = Record<string, number>;

const port = Number(process.argv[2] ?? 18861);
const traces = new Map<string, Span[]>();

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: { scopeSpans?: { spans?: Span[] }[] }[];
      };
      for (const rs of body.resourceSpans ?? [])
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? []) {
            const list = traces.get(s.traceId) ?? [];
            list.push(s);
            traces.set(s.traceId, list);
          }
    } catch {
      // a protobuf body: not ours to read
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
server.listen(port, '127.0.0.1', () => process.stderr.write(`[hops] collecting OTLP spans on http://127.0.0.1:${port}\n`));

const ms = (ns: string) => Number(BigInt(ns) / 1000n) / 1000;
const dur = (s: Span) => ms(s.endTimeUnixNano) - ms(s.startTimeUnixNano);

function hopsOf(spans: Span[]): Hops | undefined {
  const http = spans.find((s) => s.name === 'GET /subscription/status');
  const call = spans.find((s) => s.name.startsWith('nats ') && s.name.includes('status'));
  const handler = spans.find((s) => !s.name.startsWith('nats ') && !s.name.startsWith('pg ') && s.name.includes('status') && s !== http);
  if (!http || !call || !handler) return undefined;
  const served = spans.find((s) => s.name === 'pg update');
  return {
    total: dur(http),
    before_nats: ms(call.startTimeUnixNano) - ms(http.startTimeUnixNano),
    nats_transit: dur(call) - dur(handler),
    billing_handler: dur(handler),
    after_nats: ms(http.endTimeUnixNano) - ms(call.endTimeUnixNano),
    ...(served ? { served_write: dur(served) } : {}),
  };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : 0;
};
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const r2 = (x: number) => Math.round(x * 100) / 100;

function report(): void {
  const all = [...traces.values()].map(hopsOf).filter((h): h is Hops => !!h);
  const p99 = pct(
    all.map((h) => h.total!),
    99,
  );
  const tail = all.filter((h) => h.total! >= p99);
  const keys = ['total', 'before_nats', 'nats_transit', 'billing_handler', 'after_nats', 'served_write'];
  const row = (hs: Hops[], k: string) => {
    const xs = hs.map((h) => h[k]).filter((x): x is number => x !== undefined);
    return { n: xs.length, mean: r2(mean(xs)), p50: r2(pct(xs, 50)), p99: r2(pct(xs, 99)), max: r2(pct(xs, 100)) };
  };
  const out = {
    traced_requests: all.length,
    p99_total_ms: r2(p99),
    all: Object.fromEntries(keys.map((k) => [k, row(all, k)])),
    slowest_1_percent_mean_ms: Object.fromEntries(keys.map((k) => [k, row(tail, k).mean])),
  };
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
}

process.on('SIGUSR2', () => traces.clear());
process.on('SIGINT', () => {
  report();
  server.close();
  process.exit(0);
});
