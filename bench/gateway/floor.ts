// The floor of the gateway's design on this machine: the smallest possible "HTTP → NATS → service"
// relay (a node:http server whose every request is one NATS request to an echo responder in another
// process, with no auth, quota or validation), measured exactly like the gateway benchmark's half-load
// latency: open loop at BENCH_RATE requests/s (default: 6,400, the gateway's half load here), alternating
// 1 s slices with the bare server, p99 added = median over the paired slices.
// Usage: node bench/gateway/floor.ts    (BENCH_RATE, BENCH_SECONDS; writes bench/results/gateway-floor.json)

import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { merge, openLoop, type RunResult } from './load.ts';
import { spawnReady } from './processes.ts';
import { loadInfraEnv } from '../../packages/testkit/src/infra-env.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
// bench/ is not a workspace package: borrow the testkit's nats client (typed as much as used here).
interface Conn {
  subscribe(subject: string, opts: { callback: (err: unknown, msg: { respond(data: Uint8Array): boolean }) => void }): unknown;
}
const nats = createRequire(path.join(repo, 'packages/testkit/package.json'))('nats') as { connect(o: object): Promise<Conn> };
const { natsOptions } = await import('../../packages/shared/src/nats/connect.ts');
// The same TLS and nkey authentication as the services (the operator's identity, given by the parent).
const busOptions = () => natsOptions({ url: process.env.NATS_URL!, seedFile: process.env.NATS_NKEY_SEED_FILE!, caFile: process.env.NATS_CA_FILE! });
const SUBJECT = 'floor.echo';
const reply = new TextEncoder().encode(JSON.stringify({ ok: true, result: { tier: 'pro', is_active: true, expires_at: new Date().toISOString() } }));

const role = process.argv[2];
if (role === 'echo') {
  const nc = await nats.connect(busOptions());
  nc.subscribe(SUBJECT, { callback: (_e, m) => m.respond(reply) });
  process.stdout.write('{"ready":true}\n');
} else if (role === 'relay') {
  const { requestReply } = await import('../../packages/shared/src/nats/replies.ts');
  const nc = await nats.connect(busOptions());
  const ask = new TextEncoder().encode('{}');
  const server = createServer((req, res) => {
    req.resume();
    requestReply(nc as never, SUBJECT, ask, 5000).then(
      (data) => {
        res.setHeader('content-type', 'application/json; charset=utf-8');
        res.end(data);
      },
      () => {
        res.statusCode = 503;
        res.end();
      },
    );
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`));
} else {
  loadInfraEnv();
  const { startNats } = await import('../../packages/testkit/src/index.ts');
  const rate = Number(process.env.BENCH_RATE ?? 6400);
  const slices = Math.max(3, Number(process.env.BENCH_SECONDS ?? 11)) | 1;
  const broker = await startNats();
  const children: ChildProcess[] = [];
  const start = async (args: string[]) => {
    const { ready, child } = await spawnReady(args, { ...process.env, ...broker.envFor('operator') });
    children.push(child);
    return ready;
  };
  try {
    await start([fileURLToPath(import.meta.url), 'echo']);
    const relay = await start([fileURLToPath(import.meta.url), 'relay']);
    const bare = await start([path.join(here, 'bare-server.ts')]);
    const targets = { bare: { url: `http://127.0.0.1:${String(bare.port)}/` }, relay: { url: `http://127.0.0.1:${String(relay.port)}/` } };
    await openLoop(targets.bare, rate, 1000);
    await openLoop(targets.relay, rate, 1000);
    const parts: { bare: RunResult; relay: RunResult }[] = [];
    for (let i = 0; i < slices; i++) parts.push({ bare: await openLoop(targets.bare, rate, 1000), relay: await openLoop(targets.relay, rate, 1000) });
    const diffs = parts.map((p) => p.relay.latencyMs.p99 - p.bare.latencyMs.p99).sort((a, b) => a - b);
    const out = {
      rate_rps: rate,
      slices,
      bare_p99_ms: merge(parts.map((p) => p.bare)).latencyMs.p99,
      relay_p99_ms: merge(parts.map((p) => p.relay)).latencyMs.p99,
      relay_p99_added_ms_paired_median: Math.round(diffs[(diffs.length - 1) / 2]! * 1000) / 1000,
      errors: parts.reduce((n, p) => n + p.bare.errors + p.relay.errors + p.bare.non2xx + p.relay.non2xx, 0),
    };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    mkdirSync(path.join(repo, 'bench/results'), { recursive: true });
    writeFileSync(
      path.join(repo, 'bench/results/gateway-floor.json'),
      `${JSON.stringify({ benchmark: 'gateway floor: node:http → NATS request → echo process', when: new Date().toISOString(), ...out }, null, 2)}\n`,
    );
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await broker.stop();
  }
  process.exit(0);
}
