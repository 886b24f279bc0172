import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { parseTiers } from '@agenthost/shared';
import { waitFor } from '@agenthost/testkit';
import type { GatewayDB } from '../src/db/schema.ts';
import { reclaimStale } from '../src/domain/quota/reclaim.ts';
import { Usage } from '../src/domain/quota/policy.ts';
import { usageDatabase, usedToday } from './usage-db.ts';
import { activeSubscription } from './fixtures.ts';

// The durable leases against a real Postgres: what a dead replica held and did not serve goes back
// exactly once, whoever reclaims it; a live replica's leases are never taken.

const { db, pools } = usageDatabase('leases');

const sub = activeSubscription;

const today = () => new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000);

const used = usedToday;

/** A replica that died holding leases: its heartbeat is an hour old. */
async function deadReplica(d: Kysely<GatewayDB>, leases: Array<{ user: string; granted: number; served: number }>): Promise<string> {
  const replica = randomUUID();
  await d
    .insertInto('usage_replicas')
    .values({ replica_id: replica, heartbeat_at: new Date(Date.now() - 3_600_000) })
    .execute();
  for (const l of leases) {
    await sql`insert into usage_counters (user_id, "window", window_start, used) values (${l.user}, 'day', ${today()}, ${l.granted})
      on conflict (user_id, "window", window_start) do update set used = usage_counters.used + excluded.used`.execute(d);
    await d
      .insertInto('usage_leases')
      .values({ replica_id: replica, user_id: l.user, window: 'day', window_start: today(), granted: l.granted, served: l.served })
      .execute();
  }
  return replica;
}

describe('reclaim', () => {
  it('gives back granted minus served of dead replicas exactly once, with reclaimers racing', async () => {
    const d = db();
    const [u1, u2] = [randomUUID(), randomUUID()];
    // Three dead replicas over two users; u1 also has 7 requests counted by a live replica (no lease row of a dead one).
    await sql`insert into usage_counters (user_id, "window", window_start, used) values (${u1}, 'day', ${today()}, 7)`.execute(d);
    await deadReplica(d, [
      { user: u1, granted: 500, served: 37 },
      { user: u2, granted: 64, served: 64 },
    ]);
    await deadReplica(d, [{ user: u1, granted: 40, served: 3 }]);
    await deadReplica(d, [{ user: u2, granted: 1000, served: 0 }]);
    const reclaimers = Array.from({ length: 6 }, () => db());
    const results = await Promise.all(reclaimers.map((r) => reclaimStale(r, 10_000)));
    expect(results.reduce((n, r) => n + r.replicas, 0)).toBe(3);
    expect(results.reduce((n, r) => n + r.returned, 0)).toBe(463 + 37 + 1000);
    expect(await used(d, u1)).toBe(7 + 37 + 3);
    expect(await used(d, u2)).toBe(64);
    expect(await d.selectFrom('usage_leases').selectAll().execute()).toEqual([]);
    // Once is all: nothing is left to return.
    expect(await reclaimStale(d, 10_000)).toEqual({ replicas: 0, returned: 0 });
  });

  it("never takes a live replica's leases, and a replica serves from them while it lives", async () => {
    const d = db();
    const tiers = parseTiers(JSON.stringify({ pro: { requests_per_day: 100_000, requests_per_minute: 100_000 } }));
    const live = new Usage(db(), tiers, { leaseTtlMs: 600 });
    const user = randomUUID();
    for (let i = 0; i < 20; i++) await (await live.count(user, sub('pro'))).counted;
    const held = await used(d, user);
    expect(held).toBeGreaterThan(20); // a block is held
    // Several TTLs pass with another replica reclaiming all along: the live one's heartbeat keeps its leases.
    const deadline = Date.now() + 2000;
    while (Date.now() < deadline) {
      expect((await reclaimStale(d, 600)).replicas).toBe(0);
      await sleep(100);
    }
    expect(await used(d, user)).toBe(held);
    for (let i = 0; i < 5; i++) await (await live.count(user, sub('pro'))).counted;
    const lease = await d
      .selectFrom('usage_leases')
      .select(['granted', 'served'])
      .where('user_id', '=', user)
      .where('window', '=', 'day')
      .executeTakeFirstOrThrow();
    expect(lease.served).toBe(25);
    await live.stop();
    expect(await used(d, user)).toBe(25);
    expect(await d.selectFrom('usage_replicas').selectAll().execute()).toEqual([]);
  });

  it('a replica that stops heartbeating is reclaimed to exactly the requests it counted', async () => {
    const d = db();
    const tiers = parseTiers(JSON.stringify({ pro: { requests_per_day: 100_000, requests_per_minute: 100_000 } }));
    const other = new Usage(db(), tiers, { leaseTtlMs: 600 });
    const victimDb = db();
    const victim = new Usage(victimDb, tiers, { leaseTtlMs: 600 });
    const user = randomUUID();
    // 33 requests answered (their counts written), then the process "dies": its connections are cut.
    await Promise.all(Array.from({ length: 33 }, async () => (await victim.count(user, sub('pro'))).counted));
    expect(await used(d, user)).toBeGreaterThan(33);
    const victimPool = pools.at(-1)!;
    stopTimers(victim);
    await victimPool.end();
    await waitFor('the silent replica reclaimed', async () => (await used(d, user)) === 33, 10_000, 100);
    await other.stop();
  });
});

// A replica cut off from the database: outage-leases.test.ts.
describe('fencing', () => {
  const tiers = parseTiers(JSON.stringify({ pro: { requests_per_day: 100_000, requests_per_minute: 100_000 } }));

  it('a replica reclaimed while alive drops its tokens, starts over, and counts exactly', async () => {
    const d = db();
    const a = new Usage(db(), tiers, { leaseTtlMs: 400 });
    const user = randomUUID();
    for (let i = 0; i < 10; i++) await (await a.count(user, sub('pro'))).counted;
    stopTimers(a); // a long pause: no heartbeat
    await sleep(500);
    expect((await reclaimStale(d, 400)).replicas).toBe(1);
    expect(await used(d, user)).toBe(10);
    // Back: its heartbeat finds its row gone, so it drops what it held and leases anew.
    for (let i = 0; i < 7; i++) await (await a.count(user, sub('pro'))).counted;
    await a.stop();
    expect(await used(d, user)).toBe(17);
  });
});

describe('tier changes', () => {
  it("gives the old tier's blocks back while requests under the new one lease, failing none and counting each once", async () => {
    // Two limited tiers: each change gives back what was leased under the other while the next requests lease anew,
    // on the same rows (a CI run once got 503 here: Postgres found the two statements deadlocked).
    const tiers = parseTiers(
      JSON.stringify({ free: { requests_per_day: 100_000, requests_per_minute: 100_000 }, pro: { requests_per_day: 50_000, requests_per_minute: 50_000 } }),
    );
    const u = new Usage(db(), tiers, { leaseTtlMs: 5000 });
    const user = randomUUID();
    let sent = 0;
    for (let i = 0; i < 60; i++) {
      const decisions = await Promise.all([0, 1, 2, 3].map(() => u.count(user, sub(i % 2 ? 'pro' : 'free'))));
      await Promise.all(decisions.map((d) => d.counted));
      sent += decisions.length;
    }
    await u.stop();
    expect(await used(db(), user)).toBe(sent);
  });
});

/** Silence a Usage without letting it give anything back, as SIGKILL would (its process is the test's). */
function stopTimers(u: Usage): void {
  const x = u as unknown as { sweeper: NodeJS.Timeout; ledger: { timer: NodeJS.Timeout } };
  clearInterval(x.sweeper);
  clearInterval(x.ledger.timer);
}
