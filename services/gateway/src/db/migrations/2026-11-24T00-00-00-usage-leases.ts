import { sql, type Kysely } from 'kysely';

/**
 * Each replica's leased quota is written down, so the part a killed replica did not serve can go back:
 * usage_replicas holds one heartbeat per live replica; usage_leases what each replica was granted of a
 * window and how many requests it has served from it (written before each response is sent).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('usage_replicas')
    .addColumn('replica_id', 'uuid', (c) => c.primaryKey())
    .addColumn('heartbeat_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('usage_leases')
    .addColumn('replica_id', 'uuid', (c) => c.notNull())
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('window', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('granted', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('served', 'bigint', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('usage_leases_pk', ['replica_id', 'user_id', 'window', 'window_start'])
    .execute();
  await sql`comment on table usage_replicas is 'live gateway replicas; one whose heartbeat is older than USAGE_LEASE_TTL_SECONDS is reclaimed by another'`.execute(
    db,
  );
  await sql`comment on column usage_leases.granted is 'quota of the window held by the replica (leased minus given back); granted - served goes back when the replica is reclaimed'`.execute(
    db,
  );
  await sql`comment on column usage_leases.served is 'requests the replica admitted from its lease, durable before their responses were sent'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('usage_leases').execute();
  await db.schema.dropTable('usage_replicas').execute();
}
