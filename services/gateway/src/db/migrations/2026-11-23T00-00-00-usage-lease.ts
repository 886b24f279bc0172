import { sql, type Kysely } from 'kysely';

/** Blocks of quota are leased with one conditional upsert; last_grant returns how much it granted. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('usage_counters')
    .addColumn('last_grant', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.createIndex('usage_counters_window_start').on('usage_counters').columns(['window', 'window_start']).execute();
  await sql`comment on column usage_counters.used is 'requests granted to gateway replicas in this window (leased blocks included; unused blocks are given back)'`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('usage_counters_window_start').execute();
  await db.schema.alterTable('usage_counters').dropColumn('last_grant').execute();
}
