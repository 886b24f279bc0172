import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { connect } from '@agenthost/shared';
import { createDatabase, type TestDatabase } from '@agenthost/testkit';
import { migrations } from '../src/db/migrations/index.ts';
import type { GatewayDB } from '../src/db/schema.ts';

/**
 * A migrated gateway database of the suite's own, and connections to it that stand for separate replicas (each its
 * own pool, ended with the suite). `db(url)` connects through another address (a relay the test controls).
 */
export function usageDatabase(name: string) {
  let database: TestDatabase;
  const pools: pg.Pool[] = [];
  beforeAll(async () => {
    database = await createDatabase(name);
    const migrated = await connect<GatewayDB>({ url: database.url, schema: 'gateway', migrations });
    await migrated.destroy();
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => (p.ended ? undefined : p.end())));
    await database?.drop();
  });
  return {
    pools,
    url: () => database.url,
    db(url = database.url): Kysely<GatewayDB> {
      const pool = new pg.Pool({ connectionString: url, options: '-c search_path=gateway', max: 5, connectionTimeoutMillis: 2000 });
      // As shared/db.ts: a connection lost idle or mid-query is the pool's or the query's error, never the process's.
      pool.on('error', () => {});
      pool.on('connect', (client) => client.on('error', () => {}));
      pools.push(pool);
      return new Kysely<GatewayDB>({ dialect: new PostgresDialect({ pool }) });
    },
  };
}

const today = () => new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000);

/** The day's count of a user in the database (requests granted to replicas). */
export async function usedToday(d: Kysely<GatewayDB>, user: string): Promise<number> {
  const row = await d
    .selectFrom('usage_counters')
    .select('used')
    .where('user_id', '=', user)
    .where('window', '=', 'day')
    .where('window_start', '=', today())
    .executeTakeFirst();
  return row?.used ?? 0;
}
