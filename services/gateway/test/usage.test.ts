import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { Kysely, PostgresDialect } from 'kysely';
import type { NatsConnection } from 'nats';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError, connect, parseTiers } from '@agenthost/shared';
import { createDatabase, startNats, type NatsServer, type TestDatabase } from '@agenthost/testkit';
import { migrations } from '../src/db/migrations/index.ts';
import type { GatewayDB } from '../src/db/schema.ts';
import { Usage } from '../src/domain/quota/policy.ts';
import { activeSubscription } from './fixtures.ts';

// The usage module against a real Postgres (and NATS for the give-back between replicas), with an
// injected clock.

let database: TestDatabase;
let natsServer: NatsServer;
const pools: pg.Pool[] = [];
const conns: NatsConnection[] = [];
let queries = 0;

beforeAll(async () => {
  database = await createDatabase('usage');
  natsServer = await startNats();
  const migrated = await connect<GatewayDB>({ url: database.url, schema: 'gateway', migrations });
  await migrated.destroy();
});
afterAll(async () => {
  await Promise.all(conns.map((c) => c.close()));
  await Promise.all(pools.map((p) => p.end()));
  await natsServer?.stop();
  await database?.drop();
});

/** A Kysely on the gateway schema that counts the statements it runs. */
function db(): Kysely<GatewayDB> {
  const pool = new pg.Pool({ connectionString: database.url, options: '-c search_path=gateway', max: 5 });
  pool.on('error', () => {}); // idle clients are terminated when the test database is dropped
  pools.push(pool);
  return new Kysely<GatewayDB>({ dialect: new PostgresDialect({ pool }), log: () => void queries++ });
}

async function nats(): Promise<NatsConnection> {
  // The gateway's own identity: its quota peers must work within the gateway's NATS permissions.
  const c = await natsServer.connect('gateway');
  conns.push(c);
  return c;
}

const sub = activeSubscription;

async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return err instanceof AppError ? err.code : String(err);
  }
}

describe('daily window', () => {
  it('refuses at the limit with 403 DAILY_LIMIT_EXCEEDED and resets at 00:00 UTC', async () => {
    let now = Date.UTC(2026, 0, 1, 23, 59, 58);
    const usage = new Usage(db(), parseTiers(JSON.stringify({ free: { requests_per_day: 3, requests_per_minute: 100 } })), { now: () => now });
    const user = randomUUID();
    expect((await usage.count(user, sub('free'))).remainingToday).toBe(2);
    expect((await usage.count(user, sub('free'))).remainingToday).toBe(1);
    expect((await usage.count(user, sub('free'))).remainingToday).toBe(0);
    const refused = await usage.count(user, sub('free')).catch((e: AppError) => e);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).code).toBe('DAILY_LIMIT_EXCEEDED');
    expect((refused as AppError).status).toBe(403);
    expect((refused as AppError).retryAfter).toBe(2);
    expect(await usage.requestsToday(user)).toBe(3);
    expect(usage.resetAt().toISOString()).toBe('2026-01-02T00:00:00.000Z');

    now = Date.UTC(2026, 0, 2, 0, 0, 0);
    expect((await usage.count(user, sub('free'))).remainingToday).toBe(2);
    expect(await usage.requestsToday(user)).toBe(1);
    expect(usage.resetAt().toISOString()).toBe('2026-01-03T00:00:00.000Z');
    await usage.stop();
  });
});

describe('per-minute window', () => {
  it('answers 429 RATE_LIMITED with the seconds to the next minute, without spending the day', async () => {
    let now = Date.UTC(2026, 0, 1, 12, 0, 15);
    const usage = new Usage(db(), parseTiers(JSON.stringify({ free: { requests_per_day: 100, requests_per_minute: 2 } })), { now: () => now });
    const user = randomUUID();
    await usage.count(user, sub('free'));
    await usage.count(user, sub('free'));
    const refused = (await usage.count(user, sub('free')).catch((e: AppError) => e)) as AppError;
    expect(refused.code).toBe('RATE_LIMITED');
    expect(refused.status).toBe(429);
    expect(refused.retryAfter).toBe(45);
    expect(await usage.requestsToday(user)).toBe(2);
    now += 45_000;
    expect((await usage.count(user, sub('free'))).remainingToday).toBe(97);
    await usage.stop();
  });

  it('does not count the minute for unlimited tiers, but still counts their requests', async () => {
    const usage = new Usage(db(), parseTiers(undefined));
    const user = randomUUID();
    for (let i = 0; i < 50; i++) expect((await usage.count(user, sub('enterprise'))).remainingToday).toBe(-1);
    expect(await usage.requestsToday(user)).toBe(50);
    await usage.stop();
  });
});

describe('cost', () => {
  it('does not write to the database per request: blocks are leased', async () => {
    const usage = new Usage(db(), parseTiers(JSON.stringify({ pro: { requests_per_day: 1_000_000, requests_per_minute: 1_000_000 } })));
    const user = randomUUID();
    queries = 0;
    for (let i = 0; i < 2000; i++) await usage.count(user, sub('pro'));
    expect(queries).toBeLessThan(40);
    expect(await usage.requestsToday(user)).toBe(2000);
    await usage.stop();
  });

  it('never refuses below the limit, whatever the interleaving of requests and lease writes', async () => {
    const usage = new Usage(db(), parseTiers(JSON.stringify({ pro: { requests_per_day: 100_000, requests_per_minute: 100_000 } })));
    const user = randomUUID();
    for (let wave = 0; wave < 5; wave++) {
      const results = await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          await sleep(i % 7);
          return outcome(usage.count(user, sub('pro')));
        }),
      );
      expect(results.every((r) => r === 'ok')).toBe(true);
    }
    expect(await usage.requestsToday(user)).toBe(300);
    await usage.stop();
  });

  it('gives unused blocks back at shutdown and when idle', async () => {
    const d = db();
    const tiers = parseTiers(JSON.stringify({ pro: { requests_per_day: 1_000_000, requests_per_minute: 1_000_000 } }));
    const used = async (user: string) =>
      (await d.selectFrom('usage_counters').select(['window', 'used']).where('user_id', '=', user).execute()).map((r) => [r.window, r.used]).sort();
    const a = new Usage(d, tiers);
    const u1 = randomUUID();
    for (let i = 0; i < 100; i++) await a.count(u1, sub('pro'));
    await a.stop();
    expect(await used(u1)).toEqual([
      ['day', 100],
      ['minute', 100],
    ]);

    const b = new Usage(d, tiers, { idleReturnMs: 300 });
    const u2 = randomUUID();
    for (let i = 0; i < 30; i++) await b.count(u2, sub('pro'));
    expect(await used(u2)).not.toEqual([
      ['day', 30],
      ['minute', 30],
    ]); // a block is held
    const deadline = Date.now() + 5000;
    while (
      JSON.stringify(await used(u2)) !==
        JSON.stringify([
          ['day', 30],
          ['minute', 30],
        ]) &&
      Date.now() < deadline
    )
      await sleep(100);
    expect(await used(u2)).toEqual([
      ['day', 30],
      ['minute', 30],
    ]);
    await b.stop();
  });
});

describe('exact under concurrency', () => {
  const tiers = parseTiers(JSON.stringify({ pro: { requests_per_day: 40, requests_per_minute: 100_000 } }));

  it('one replica: of 3N parallel requests exactly N succeed', async () => {
    const usage = new Usage(db(), tiers, { nc: await nats() });
    const user = randomUUID();
    const results = await Promise.all(Array.from({ length: 120 }, () => outcome(usage.count(user, sub('pro')))));
    expect(results.filter((r) => r === 'ok')).toHaveLength(40);
    expect(results.filter((r) => r === 'DAILY_LIMIT_EXCEEDED')).toHaveLength(80);
    await usage.stop();
  });

  it('two replicas sharing the database: exactly N, also when one holds an unused block', async () => {
    const a = new Usage(db(), tiers, { nc: await nats(), idleReturnMs: 60_000 });
    const b = new Usage(db(), tiers, { nc: await nats(), idleReturnMs: 60_000 });
    const user = randomUUID();
    // a leases a block bigger than what it uses and then goes quiet; b needs every last request.
    await a.count(user, sub('pro'));
    await a.count(user, sub('pro'));
    const results = await Promise.all(Array.from({ length: 120 }, (_, i) => outcome((i % 3 === 0 ? a : b).count(user, sub('pro')))));
    expect(results.filter((r) => r === 'ok')).toHaveLength(38);
    const more = await Promise.all(Array.from({ length: 10 }, () => outcome(b.count(user, sub('pro')))));
    expect(more.every((r) => r === 'DAILY_LIMIT_EXCEEDED')).toBe(true);
    await Promise.all([a.stop(), b.stop()]);

    const user2 = randomUUID();
    const c = new Usage(db(), tiers, { nc: await nats(), idleReturnMs: 60_000 });
    const e = new Usage(db(), tiers, { nc: await nats(), idleReturnMs: 60_000 });
    await c.count(user2, sub('pro')); // c now holds a prefetched block
    const onlyE = await Promise.all(Array.from({ length: 100 }, () => outcome(e.count(user2, sub('pro')))));
    expect(onlyE.filter((r) => r === 'ok')).toHaveLength(39);
    await Promise.all([c.stop(), e.stop()]);
  });
});
