// Our one-inbox NATS request/reply (packages/shared/src/nats/replies.ts) against nats.js's own request() (as is, and
// with noAsyncTraces, which skips its per-request stack capture), in the
// same run, on the same connection to the same echo responder (another process), with the same TLS and nkey
// authentication as the services. Closed loop, CONCURRENCY requests in flight (the gateway's benchmark keeps 32
// connections busy), alternating 1 s slices so both see the same machine. Reported: requests/s, client CPU
// µs/request and p99, each as ours / nats.js.
// Usage: node bench/nats/run.ts    (BENCH_SLICES, BENCH_CONCURRENCY; writes bench/results/nats-request.json)

import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnReady } from '../gateway/processes.ts';
import { loadInfraEnv } from '../../packages/testkit/src/infra-env.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
// bench/ is not a workspace package: borrow the shared package's nats client (typed as much as used here).
interface Msg {
  data: Uint8Array;
  respond(data: Uint8Array): boolean;
}
interface Conn {
  subscribe(subject: string, opts: { callback: (err: unknown, msg: Msg) => void }): unknown;
  request(subject: string, data: Uint8Array, opts: { timeout: number }): Promise<Msg>;
  drain(): Promise<void>;
}
const nats = createRequire(path.join(repo, 'packages/shared/package.json'))('nats') as { connect(o: object): Promise<Conn> };
const { natsOptions } = await import('../../packages/shared/src/nats/connect.ts');
const busOptions = () => natsOptions({ url: process.env.NATS_URL!, seedFile: process.env.NATS_NKEY_SEED_FILE!, caFile: process.env.NATS_CA_FILE! });
const SUBJECT = 'bench.echo';
// The size of billing-chain's status answer, the gateway's hottest call.
const reply = new TextEncoder().encode(
  JSON.stringify({
    ok: true,
    result: {
      wallet_address: 'x'.repeat(44),
      tier: 'pro',
      is_active: true,
      expires_at: new Date().toISOString(),
      cancelled: false,
      refreshed_at: new Date().toISOString(),
    },
  }),
);

interface Slice {
  requests: number;
  seconds: number;
  cpuUs: number;
  latencies: number[];
}

async function slice(ask: () => Promise<unknown>, concurrency: number, ms: number): Promise<Slice> {
  const latencies: number[] = [];
  const cpu = process.cpuUsage();
  const started = performance.now();
  const end = started + ms;
  const worker = async () => {
    while (performance.now() < end) {
      const t = performance.now();
      await ask();
      latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const used = process.cpuUsage(cpu);
  return { requests: latencies.length, seconds: (performance.now() - started) / 1000, cpuUs: used.user + used.system, latencies };
}

const p99 = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))] ?? 0;
};
const summary = (parts: Slice[]) => {
  const requests = parts.reduce((n, p) => n + p.requests, 0);
  const seconds = parts.reduce((n, p) => n + p.seconds, 0);
  return {
    requests,
    rps: Math.round(requests / seconds),
    cpu_us_per_request: Math.round((parts.reduce((n, p) => n + p.cpuUs, 0) / requests) * 10) / 10,
    p99_ms: Math.round(p99(parts.flatMap((p) => p.latencies)) * 1000) / 1000,
  };
};

if (process.argv[2] === 'echo') {
  const nc = await nats.connect(busOptions());
  nc.subscribe(SUBJECT, { callback: (_e, m) => m.respond(reply) });
  process.stdout.write('{"ready":true}\n');
} else {
  loadInfraEnv();
  const { startNats } = await import('../../packages/testkit/src/index.ts');
  const { requestReply } = await import('../../packages/shared/src/nats/replies.ts');
  const slices = Math.max(2, Number(process.env.BENCH_SLICES ?? 8));
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32);
  const broker = await startNats();
  Object.assign(process.env, broker.envFor('operator'));
  let echo: ChildProcess | undefined;
  try {
    echo = (await spawnReady([fileURLToPath(import.meta.url), 'echo'], process.env)).child;
    const nc = await nats.connect(busOptions());
    // nats.js captures a stack trace per request unless told not to: measured both ways.
    const quiet = await nats.connect({ ...busOptions(), noAsyncTraces: true });
    const ask = new TextEncoder().encode('{"user_id":"u","wallet_address":"w"}');
    const ways = {
      ours: () => requestReply(nc as never, SUBJECT, ask, 5000),
      natsjs: () => nc.request(SUBJECT, ask, { timeout: 5000 }),
      natsjs_no_traces: () => quiet.request(SUBJECT, ask, { timeout: 5000 }),
    };
    type Way = keyof typeof ways;
    await slice(ways.ours, concurrency, 1000); // warm-up, both
    await slice(ways.natsjs, concurrency, 1000);
    await slice(ways.natsjs_no_traces, concurrency, 1000);
    const parts: Record<Way, Slice[]> = { ours: [], natsjs: [], natsjs_no_traces: [] };
    const names = Object.keys(ways) as Way[];
    for (let i = 0; i < slices; i++) {
      // Rotate which goes first, so none always follows another's garbage.
      for (let j = 0; j < names.length; j++) {
        const way = names[(i + j) % names.length]!;
        parts[way].push(await slice(ways[way], concurrency, 1000));
      }
    }
    const ours = summary(parts.ours);
    const natsjs = summary(parts.natsjs);
    const natsjsNoTraces = summary(parts.natsjs_no_traces);
    const ratio = (a: ReturnType<typeof summary>, b: ReturnType<typeof summary>) => ({
      rps: Math.round((a.rps / b.rps) * 1000) / 1000,
      cpu_us_per_request: Math.round((a.cpu_us_per_request / b.cpu_us_per_request) * 1000) / 1000,
      p99: Math.round((a.p99_ms / b.p99_ms) * 1000) / 1000,
    });
    const out = {
      benchmark: 'NATS request/reply: our one-inbox requestReply against nats.js request(), same connection, echo in another process',
      when: new Date().toISOString(),
      machine: { cpus: os.cpus().length, loadavg: os.loadavg().map((l) => Math.round(l * 10) / 10) },
      settings: { concurrency, slices, slice_s: 1 },
      ours,
      natsjs,
      natsjs_no_traces: natsjsNoTraces,
      ratio_ours_to_natsjs: ratio(ours, natsjs),
      ratio_ours_to_natsjs_no_traces: ratio(ours, natsjsNoTraces),
    };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    mkdirSync(path.join(repo, 'bench/results'), { recursive: true });
    writeFileSync(path.join(repo, 'bench/results/nats-request.json'), `${JSON.stringify(out, null, 2)}\n`);
    await nc.drain();
    await quiet.drain();
  } finally {
    echo?.kill('SIGTERM');
    await broker.stop();
  }
  process.exit(0);
}
