import { sql, type Kysely } from 'kysely';

// Long-lived client streams (domain/stream-slots.ts): one row per open event stream, log follow or key watch, shared
// by every replica so the per-user and per-instance caps hold across them. A row lives while its replica renews it;
// a replica that dies leaves rows that stop counting once expires_at passes.
// And the deletions read from the event stream (domain/instance-deletions.ts): a resume after a deletion asks
// here, one row by its key, instead of reading every deletion the stream holds.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('stream_slots')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('replica_id', 'uuid', (c) => c.notNull())
    .addColumn('user_id', 'uuid')
    .addColumn('instance_id', 'varchar(100)', (c) => c.notNull())
    .addColumn('kind', 'varchar(10)', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await sql`create index stream_slots_user on stream_slots (user_id)`.execute(db);
  await sql`create index stream_slots_instance on stream_slots (instance_id, kind)`.execute(db);
  await db.schema
    .createTable('instance_deletions')
    .addColumn('instance_id', 'varchar(100)', (c) => c.primaryKey())
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('deleted_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await sql`create index instance_deletions_seq on instance_deletions (seq)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('instance_deletions').execute();
  await db.schema.dropTable('stream_slots').execute();
}
