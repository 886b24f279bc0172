import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('instances')
    .addColumn('instance_id', 'varchar(50)', (c) => c.primaryKey())
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('secret_hash', 'bytea', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('issued_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('instances_user_id').on('instances').column('user_id').execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('instance_id', 'varchar(50)', (c) => c.notNull().references('instances.instance_id').onDelete('cascade'))
    .addColumn('key_name', 'varchar(100)', (c) => c.notNull())
    .addColumn('encrypted_value', 'text', (c) => c.notNull())
    .addColumn('kid', 'text', (c) => c.generatedAlwaysAs(sql`(encrypted_value::jsonb ->> 'kid')`).stored().notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('api_keys_instance_key_name', ['instance_id', 'key_name'])
    .execute();
  await db.schema.createIndex('api_keys_kid').on('api_keys').column('kid').execute();

  await db.schema
    .createTable('audit_log')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('instance_id', 'varchar(50)', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull().check(sql`action in ('key_stored', 'key_updated', 'key_deleted', 'key_retrieved')`))
    .addColumn('key_name', 'varchar(100)', (c) => c.notNull())
    .addColumn('key_length', 'integer', (c) => c.notNull())
    .addColumn('ip_address', 'text', (c) => c.notNull())
    .addColumn('user_agent', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('audit_log_instance_at').on('audit_log').columns(['instance_id', 'at desc', 'id desc']).execute();

  await db.schema
    .createTable('auth_failures')
    .addColumn('bucket', 'text', (c) => c.primaryKey())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const t of ['auth_failures', 'audit_log', 'api_keys', 'instances']) await db.schema.dropTable(t).execute();
}
