import { sql, type Kysely } from 'kysely';

// Backups of instance volumes. A row is written once its archive is whole on disk and deleted before the
// file, so a file without a row is debris (removed) and a row always has its archive.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('backups')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('instance_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('manual', 'scheduled')`))
    .addColumn('size_bytes', 'bigint', (c) => c.notNull())
    .addColumn('framework', 'text', (c) => c.notNull())
    .addColumn('version', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('backups_by_instance').on('backups').columns(['user_id', 'instance_id', 'created_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('backups').execute();
}
