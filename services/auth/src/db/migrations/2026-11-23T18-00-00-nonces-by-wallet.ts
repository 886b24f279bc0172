import { sql, type Kysely } from 'kysely';

// A wallet's outstanding nonces are bounded at each issue (sessions.ts): found by wallet, newest first. issued_at is
// whole seconds (it is in the signed message), so the order comes from the moment the row was made.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('nonces')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .execute();
  await db.schema.createIndex('nonces_wallet_created').on('nonces').columns(['wallet_address', 'created_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('nonces_wallet_created').execute();
  await db.schema.alterTable('nonces').dropColumn('created_at').execute();
}
