import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('subscriptions')
    .addColumn('wallet_address', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'uuid')
    .addColumn('pda', 'text', (c) => c.notNull().unique())
    .addColumn('tier', 'smallint', (c) => c.notNull().check(sql`tier between 0 and 2`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('chain_active', 'boolean', (c) => c.notNull())
    .addColumn('cancelled', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('lamports', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('refreshed_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('subscriptions_due').on('subscriptions').column('expires_at').where(sql.ref('chain_active'), '=', true).execute();
  await db.schema
    .createTable('used_signatures')
    .addColumn('signature', 'text', (c) => c.primaryKey())
    .addColumn('wallet_address', 'text', (c) => c.notNull())
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('tier', 'smallint', (c) => c.notNull())
    .addColumn('slot', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('cursors')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('signature', 'text', (c) => c.notNull())
    .addColumn('slot', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('leases')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('holder', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('keeper_keys')
    .addColumn('id', 'integer', (c) => c.primaryKey().check(sql`id = 1`))
    .addColumn('secret_key', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const t of ['keeper_keys', 'leases', 'cursors', 'used_signatures', 'subscriptions']) await db.schema.dropTable(t).execute();
}
