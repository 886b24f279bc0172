import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// bench/ is not a workspace package: borrow the testkit's pg.
interface PgClient {
  connect(): Promise<void>;
  query<R>(text: string): Promise<{ rows: R[] }>;
  end(): Promise<void>;
}
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const pg = createRequire(path.join(repo, 'packages/testkit/package.json'))('pg') as { Client: new (o: { connectionString: string }) => PgClient };

/** Rows inserted, updated and deleted so far in a table of the gateway's schema (pg_stat_user_tables). */
export async function usageWrites(dbUrl: string, table = 'usage_counters'): Promise<number> {
  const c = new pg.Client({ connectionString: dbUrl });
  await c.connect();
  try {
    const r = await c.query<{ w: string }>(
      `select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::text as w from pg_stat_user_tables where schemaname = 'gateway' and relname = '${table}'`,
    );
    return Number(r.rows[0]?.w ?? 0);
  } finally {
    await c.end();
  }
}
