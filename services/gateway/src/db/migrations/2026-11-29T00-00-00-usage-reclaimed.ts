import { sql, type Kysely } from 'kysely';

// What a reclaim took back from a replica thought dead (domain/quota/reclaim.ts): the served count of each lease as
// it stood then. A replica that was only cut off from the database (an outage, a partition) kept serving from its
// blocks meanwhile (USAGE_OFFLINE_SECONDS); when it is back it finds itself reclaimed, and adds to the counter
// exactly what it served past this count. Rows go after two days, with the windows they count.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('usage_reclaimed')
    .addColumn('replica_id', 'uuid', (c) => c.notNull())
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('window', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('served', 'bigint', (c) => c.notNull())
    .addColumn('reclaimed_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('usage_reclaimed_pk', ['replica_id', 'user_id', 'window', 'window_start'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('usage_reclaimed').execute();
}
