import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('instances')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('framework', 'text', (c) => c.notNull())
    .addColumn('version', 'text', (c) => c.notNull())
    .addColumn('image', 'text', (c) => c.notNull())
    .addColumn('tier', 'text', (c) => c.notNull())
    .addColumn('memory_mb', 'integer', (c) => c.notNull())
    .addColumn('cpus', 'real', (c) => c.notNull())
    .addColumn('pids', 'integer', (c) => c.notNull())
    // The port lease: a row holds its port until the row is gone; the UNIQUE constraint makes a double lease impossible.
    .addColumn('port', 'integer', (c) => c.notNull().unique())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('provisioning', 'running', 'stopped', 'failed')`))
    // How far the current operation got (crash recovery): leased, container, done, recreating, stopping, deleting.
    .addColumn('step', 'text', (c) => c.notNull())
    // Incremented each time a container is (re)created: a readiness watcher of an older container cannot flip the new one.
    .addColumn('generation', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('failure_reason', 'text')
    .addColumn('access_token_hash', 'text', (c) => c.notNull())
    .addColumn('container_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('started_at', 'timestamptz')
    .addColumn('ready_deadline', 'timestamptz')
    .addColumn('last_activity', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('storage_bytes', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('deleting_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('instances_user_id').on('instances').column('user_id').execute();
  await db.schema.createIndex('instances_status').on('instances').column('status').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('instances').execute();
}
