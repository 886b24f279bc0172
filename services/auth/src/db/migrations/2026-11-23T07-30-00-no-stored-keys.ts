import { sql, type Kysely } from 'kysely';

// The signing key lives in a file only auth can read (AUTH_JWT_PRIVATE_KEY_FILE), never in a table: the
// development keys older versions generated and stored here in plain are dropped with the table.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('signing_keys').ifExists().execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('signing_keys')
    .addColumn('kid', 'text', (c) => c.primaryKey())
    .addColumn('private_pem', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}
