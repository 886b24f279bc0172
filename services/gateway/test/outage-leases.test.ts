import net from 'node:net';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { parseTiers } from '@agenthost/shared';
import { waitFor } from '@agenthost/testkit';
import { reclaimStale } from '../src/domain/quota/reclaim.ts';
import { Usage } from '../src/domain/quota/policy.ts';
import { usageDatabase, usedToday } from './usage-db.ts';
import { activeSubscription as sub } from './fixtures.ts';

// A gateway replica cut off from Postgres (through a TCP relay the test cuts and restores, as a partition or an outage
// would): it serves from the quota blocks it holds for OUTAGE_SERVE_SECONDS, and refuses after; another replica may
// reclaim its leases meanwhile; once it reaches the database again the day's count equals the requests it answered.

const tiers = parseTiers(JSON.stringify({ pro: { requests_per_day: 100_000, requests_per_minute: 100_000 } }));
const { db, url: databaseUrl } = usageDatabase('outage_leases');

/** A TCP relay to Postgres: cut() drops every connection and refuses new ones, restore() lets them through again. */
async function relay() {
  const target = new URL(databaseUrl());
  const open = new Set<net.Socket>();
  let cut = false;
  const server = net.createServer((client) => {
    if (cut) return void client.destroy();
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('error', () => {});
      s.on('close', () => open.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = new URL(databaseUrl());
  url.host = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return {
    url: url.toString(),
    cut: () => {
      cut = true;
      for (const s of open) s.destroy();
    },
    restore: () => void (cut = false),
    close: () => server.close(),
  };
}

const used = usedToday;
const outcome = (p: Promise<{ counted: Promise<void> }>) =>
  p.then(
    async (d) => {
      await d.counted;
      return 'served';
    },
    (e: { code?: string }) => e.code,
  );

describe('a replica cut off from the database', () => {
  it('serves from its blocks meanwhile, is reclaimed by another, and counts exactly once it is back', async () => {
    const d = db();
    const link = await relay();
    const cut = new Usage(db(link.url), tiers, { leaseTtlMs: 400, offlineMs: 60_000 });
    const user = randomUUID();
    for (let i = 0; i < 10; i++) await (await cut.count(user, sub('pro'))).counted;
    expect(await used(d, user)).toBeGreaterThan(15); // a block is held beyond the 10 answered

    link.cut();
    for (let i = 0; i < 3; i++) expect(await outcome(cut.count(user, sub('pro')))).toBe('served');
    // Past the lease TTL another replica takes it for dead and gives back what it held unserved, as the database knew.
    await sleep(500);
    expect((await reclaimStale(d, 400)).replicas).toBe(1);
    expect(await used(d, user)).toBe(10);
    for (let i = 0; i < 2; i++) expect(await outcome(cut.count(user, sub('pro')))).toBe('served');

    link.restore();
    await waitFor('the 5 requests answered while cut off counted', async () => (await used(d, user)) === 15, 10_000, 100);
    for (let i = 0; i < 4; i++) await (await cut.count(user, sub('pro'))).counted;
    await cut.stop();
    expect(await used(d, user)).toBe(19);
    link.close();
  });

  it('refuses with 503 once it has been cut off longer than it may serve, and loses no count', async () => {
    const d = db();
    const link = await relay();
    const cut = new Usage(db(link.url), tiers, { leaseTtlMs: 400, offlineMs: 800 });
    const user = randomUUID();
    for (let i = 0; i < 6; i++) await (await cut.count(user, sub('pro'))).counted;
    link.cut();
    let answered = 6;
    const once = async () => {
      const o = await outcome(cut.count(user, sub('pro')));
      if (o === 'served') answered++;
      return o;
    };
    expect(await once()).toBe('served');
    await waitFor('refused once cut off past its allowance', async () => (await once()) === 'SERVICE_UNAVAILABLE', 10_000, 100);
    expect(await once()).toBe('SERVICE_UNAVAILABLE');
    link.restore();
    await cut.stop();
    await reclaimStale(d, 400);
    expect(await used(d, user)).toBe(answered);
    link.close();
  });
});
