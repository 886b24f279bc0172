import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('usage_counters')
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('window', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('used', 'bigint', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('usage_counters_pk', ['user_id', 'window', 'window_start'])
    .execute();
  await sql`comment on table usage_counters is 'requests counted per user per window (day, minute); leased in blocks by gateways'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('usage_counters').execute();
}
