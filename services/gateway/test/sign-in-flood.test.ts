import { setTimeout as sleep } from 'node:timers/promises';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import bs58 from 'bs58';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AddressedReply, gatewayUrl, newWallet, requestFrom, startStack, waitFor, type Stack } from '@agenthost/testkit';

// A 5-minute flood of the public sign-in endpoints from one address (the issue's load test: 47,017 nonces in 15 s,
// each a row living 5 minutes), against two gateway replicas sharing their limits. Bounds are measured against the
// start of the run; nothing here depends on how fast the machine is.

const FLOOD_MS = 5 * 60_000;
const WINDOW_SECONDS = 60;
const PER_ADDRESS = 20;
const PER_WALLET = 4;
/** The most windows a 5-minute flood can touch (one started before it, and partial ones at both ends). */
const WINDOWS = FLOOD_MS / 1000 / WINDOW_SECONDS + 2;
const MIB = 1024 * 1024;

let stack: Stack;
let db: pg.Client;

beforeAll(async () => {
  stack = await startStack({
    services: ['auth'],
    gateways: 2,
    serviceEnv: {
      gateway: {
        NONCES_PER_ADDRESS: String(PER_ADDRESS),
        LOGINS_PER_ADDRESS: String(PER_ADDRESS),
        NONCES_PER_WALLET: String(PER_WALLET),
        LOGINS_PER_WALLET: String(PER_WALLET),
        SIGN_IN_WINDOW_SECONDS: String(WINDOW_SECONDS),
      },
      auth: { NONCE_TTL_SECONDS: '20', NONCE_PURGE_INTERVAL_SECONDS: '5' },
    },
  });
  db = new pg.Client({ connectionString: stack.db.url });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  await stack?.stop();
});

/** Kept-alive connections from one client address, as a flooding client holds them (no port churn). */
const agents = new Map<string, http.Agent>();
const agentFor = (from: string) => agents.get(from) ?? agents.set(from, new http.Agent({ keepAlive: true, maxSockets: 16, localAddress: from })).get(from)!;

const send = (replica: number, from: string, method: 'GET' | 'POST', path: string, body?: unknown) =>
  requestFrom(`${gatewayUrl(stack.gateways[replica]!)}${path}`, { from, method, body, agent: agentFor(from) });

const nonce = (replica: number, from: string, wallet = newWallet().address) => send(replica, from, 'GET', `/auth/nonce?wallet_address=${wallet}`);
const badLogin = (replica: number, from: string) =>
  send(replica, from, 'POST', '/auth/login', { wallet_address: newWallet().address, signature_base58: bs58.encode(new Uint8Array(64)), nonce: 'x'.repeat(22) });

const rss = async (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
const count = async (q: string) => Number((await db.query(q)).rows[0].n);

interface Sample {
  rss: number[];
  nonces: number;
  limiterRows: number;
}

describe('a 5-minute sign-in flood from one address', () => {
  it(
    'gets 429 with Retry-After past the limits while other addresses sign in, and memory and the nonce table stay bounded',
    async () => {
      const pids = [...stack.gateways.map((g) => g.pid()!), stack.services.get('auth')!.pid()!];
      const sample = async (): Promise<Sample> => ({
        rss: await Promise.all(pids.map(rss)),
        nonces: await count('select count(*) as n from auth.nonces'),
        limiterRows: await count('select count(*) as n from gateway.sign_in_limits'),
      });
      const start = await sample();
      const samples: Sample[] = [];
      const flood = { nonce: new Map<number, number>(), login: new Map<number, number>() };
      const badRefusals: string[] = [];
      const bystanders: Array<{ nonce: number; login: number }> = [];
      const until = Date.now() + FLOOD_MS;
      let i = 0;
      const tally = (kind: 'nonce' | 'login', r: AddressedReply) => {
        flood[kind].set(r.status, (flood[kind].get(r.status) ?? 0) + 1);
        if (r.status === 429 && !(Number(r.retryAfter) > 0 && r.body.code === 'RATE_LIMITED' && r.body.status === 429 && typeof r.body.error === 'string')) {
          badRefusals.push(JSON.stringify(r));
        }
      };
      // 4 clients on one address, each alternating nonces (a fresh wallet each) and bad logins over both replicas.
      const flooders = Array.from({ length: 4 }, async () => {
        while (Date.now() < until) {
          tally('nonce', await nonce(i++ % 2, '127.0.4.1'));
          tally('login', await badLogin(i++ % 2, '127.0.4.1'));
        }
      });
      // Meanwhile, every few seconds, someone else signs in from an address of their own, and the bounds are sampled.
      const watcher = (async () => {
        for (let n = 1; Date.now() < until; n++) {
          const from = `127.0.5.${(n % 250) + 1}`;
          const wallet = newWallet();
          const got = await nonce(n % 2, from, wallet.address);
          const login =
            got.status === 200
              ? await send((n + 1) % 2, from, 'POST', '/auth/login', {
                  wallet_address: wallet.address,
                  signature_base58: bs58.encode(wallet.sign(got.body.message as string)),
                  nonce: got.body.nonce,
                })
              : got;
          bystanders.push({ nonce: got.status, login: login.status });
          samples.push(await sample());
          await sleep(5_000);
        }
      })();
      await Promise.all([...flooders, watcher]);
      samples.push(await sample());

      // One address: at most its limit per window, then 429 in the error shape with Retry-After.
      expect([...flood.nonce.keys()].sort()).toEqual([200, 429]);
      expect([...flood.login.keys()].sort()).toEqual([401, 429]);
      expect(flood.nonce.get(200)!).toBeLessThanOrEqual(PER_ADDRESS * WINDOWS);
      expect(flood.login.get(401)!).toBeLessThanOrEqual(PER_ADDRESS * WINDOWS);
      const refused = flood.nonce.get(429)! + flood.login.get(429)!;
      expect(refused).toBeGreaterThan(10 * (flood.nonce.get(200)! + flood.login.get(401)!));
      expect(badRefusals).toEqual([]);
      // Everyone else was served all along.
      expect(bystanders.length).toBeGreaterThan(10);
      expect(bystanders.filter((b) => b.nonce !== 200 || b.login !== 200)).toEqual([]);

      // The nonce table: the flood's outstanding nonces (a window's worth, twice at a window's edge) and nothing per request.
      for (const s of samples) expect(s.nonces - start.nonces).toBeLessThanOrEqual(2 * PER_ADDRESS + 2);
      // The limiter's rows: one per address and wallet counted, never one per refused request.
      const last = samples.at(-1)!;
      expect(last.limiterRows - start.limiterRows).toBeLessThanOrEqual(4 * bystanders.length + WINDOWS * (2 + 2 * PER_ADDRESS));
      expect(last.limiterRows - start.limiterRows).toBeLessThan(refused / 10);
      // Memory of both gateways and auth, as RSS: within 128 MiB of the start at every sample, to the end of the flood.
      // RSS steps up as V8 sizes its heap to the flood (the young generation and old-space limit it grows to, and keeps),
      // at times it alone picks: 5-18 MiB in runs of 12,800 requests, 31-44 MiB in others (one flat at 11 MiB for three
      // minutes, then 30 in its last 100 s), 75 MiB once under a load of 15, where a 64 MiB bound failed. A leak of
      // 8 KB a request (~18,000 requests here) fails this bound; a failure prints each process's growth by sample.
      const names = ['gateway 0', 'gateway 1', 'auth'];
      const grown = (p: number) => (s: Sample) => s.rss[p]! - start.rss[p]!;
      const growth = names.map((_, p) => Math.max(...samples.map(grown(p))));
      const series = (p: number) => samples.map((s) => Math.round(grown(p)(s) / MIB)).join(' ');
      for (const [p, name] of names.entries()) expect(growth[p]!, `${name}, RSS growth by sample (MiB): ${series(p)}`).toBeLessThan(128 * MIB);
      console.log(
        `flood: RSS growth by sample (MiB): ${names.map((n, p) => `${n}: ${series(p)}`).join('; ')}\nflood: ${i} requests, ${refused} refused, ${bystanders.length} bystanders served; growth ${growth.map((g, p) => `${names[p]} ${(g / MIB).toFixed(1)} MiB`).join(', ')}; nonces +${Math.max(...samples.map((s) => s.nonces - start.nonces))}, limiter rows +${last.limiterRows - start.limiterRows}`,
      );
      // Expired nonces are purged.
      await waitFor(
        'expired nonces purged',
        async () => ((await count('select count(*) as n from auth.nonces where expires_at < now()')) === 0 ? true : undefined),
        60_000,
        500,
      );
      for (const a of agents.values()) a.destroy();
    },
    FLOOD_MS + 180_000,
  );
});
