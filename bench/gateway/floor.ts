// The floor of the gateway's design on this machine: the smallest possible "HTTP → NATS → service"
// relay (a node:http server whose every request is one NATS request to an echo responder in another
// process, with no auth, quota or validation), measured exactly like the gateway benchmark's half-load
// latency: open loop at BENCH_RATE requests/s (default: 2,100, the gateway's half load here), alternating
// 1 s slices with the bare server, p99 added = median over the paired slices.
// With FLOOR_RELAY_BURN_US / FLOOR_ECHO_BURN_US a weighted pair joins the slices: the same relay and echo spending
// that much CPU per request (give them the gateway run's cpu_us_per_request: gateway + postgres − floor-relay, and
// billing-chain − floor-echo). The p99 it adds over the plain floor is what the gateway's CPU cost alone adds.
// Usage: node bench/gateway/floor.ts    (BENCH_RATE, BENCH_SECONDS; writes bench/results/gateway-floor.json)

import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { merge, openLoop, type RunResult, type Target } from './load.ts';
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
// Each relay asks its own echo (a weighted pair runs beside the plain one).
const SUBJECT = `floor.echo.${process.env.FLOOR_PAIR ?? 'plain'}`;
const reply = new TextEncoder().encode(JSON.stringify({ ok: true, result: { tier: 'pro', is_active: true, expires_at: new Date().toISOString() } }));

/**
 * FLOOR_BURN_US: CPU spent per request (a busy loop) before answering. A weighted floor is the floor's relay and
 * echo given the gateway's and billing-chain's extra CPU per request, spread evenly over every request: the tail it
 * adds over the plain floor is what that much CPU per request costs on this machine, whatever the code does with it.
 */
const burnMs = Number(process.env.FLOOR_BURN_US ?? 0) / 1000;
const burn = () => {
  const until = performance.now() + burnMs;
  while (performance.now() < until);
};

const role = process.argv[2];
if (role === 'echo') {
  const nc = await nats.connect(busOptions());
  nc.subscribe(SUBJECT, {
    callback: (_e, m) => {
      if (burnMs) burn();
      m.respond(reply);
    },
  });
  process.stdout.write('{"ready":true}\n');
} else if (role === 'relay') {
  const { relayOnce } = await import('./relay.ts');
  const nc = await nats.connect(busOptions());
  const server = createServer((req, res) => {
    req.resume();
    if (burnMs) burn();
    relayOnce(nc, SUBJECT, res);
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`));
} else {
  loadInfraEnv();
  const { startNats } = await import('../../packages/testkit/src/index.ts');
  const rate = Number(process.env.BENCH_RATE ?? 2100);
  const slices = Math.max(3, Number(process.env.BENCH_SECONDS ?? 11)) | 1;
  const broker = await startNats();
  const children: ChildProcess[] = [];
  const start = async (args: string[], env: Record<string, string> = {}) => {
    const { ready, child } = await spawnReady(args, { ...process.env, ...broker.envFor('operator'), ...env });
    children.push(child);
    return ready;
  };
  const self = fileURLToPath(import.meta.url);
  // FLOOR_RELAY_BURN_US / FLOOR_ECHO_BURN_US: a weighted pair too (see burn above), in the same slices.
  const weights = { relay: process.env.FLOOR_RELAY_BURN_US ?? '', echo: process.env.FLOOR_ECHO_BURN_US ?? '' };
  try {
    await start([self, 'echo'], { FLOOR_BURN_US: '0' });
    const relay = await start([self, 'relay'], { FLOOR_BURN_US: '0' });
    const bare = await start([path.join(here, 'bare-server.ts')]);
    const targets: Record<string, Target> = {
      bare: { url: `http://127.0.0.1:${String(bare.port)}/` },
      relay: { url: `http://127.0.0.1:${String(relay.port)}/` },
    };
    if (weights.relay || weights.echo) {
      await start([self, 'echo'], { FLOOR_PAIR: 'weighted', FLOOR_BURN_US: weights.echo || '0' });
      const weighted = await start([self, 'relay'], { FLOOR_PAIR: 'weighted', FLOOR_BURN_US: weights.relay || '0' });
      targets.weighted = { url: `http://127.0.0.1:${String(weighted.port)}/` };
    }
    const names = Object.keys(targets);
    for (const n of names) await openLoop(targets[n]!, rate, 1000);
    const parts: Record<string, RunResult>[] = [];
    for (let i = 0; i < slices; i++) {
      const part: Record<string, RunResult> = {};
      for (const n of names) part[n] = await openLoop(targets[n]!, rate, 1000);
      parts.push(part);
    }
    const pairedMedian = (a: string, b: string) => {
      const diffs = parts.map((p) => p[a]!.latencyMs.p99 - p[b]!.latencyMs.p99).sort((x, y) => x - y);
      return Math.round(diffs[(diffs.length - 1) / 2]! * 1000) / 1000;
    };
    const p99 = (n: string) => merge(parts.map((p) => p[n]!)).latencyMs.p99;
    const out = {
      rate_rps: rate,
      slices,
      bare_p99_ms: p99('bare'),
      relay_p99_ms: p99('relay'),
      relay_p99_added_ms_paired_median: pairedMedian('relay', 'bare'),
      ...(targets.weighted
        ? {
            weighted: { relay_burn_us: Number(weights.relay || 0), echo_burn_us: Number(weights.echo || 0) },
            weighted_p99_ms: p99('weighted'),
            weighted_p99_added_over_relay_ms_paired_median: pairedMedian('weighted', 'relay'),
          }
        : {}),
      errors: parts.reduce((n, p) => n + Object.values(p).reduce((m, r) => m + r.errors + r.non2xx, 0), 0),
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
