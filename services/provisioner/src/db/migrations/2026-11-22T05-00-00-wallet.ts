import type { Kysely } from 'kysely';

// The owner's wallet, so a subscription change (announced per wallet) can find the wallet's instances.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('instances').addColumn('wallet_address', 'text').execute();
  await db.schema.createIndex('instances_wallet_address').on('instances').column('wallet_address').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('instances').dropColumn('wallet_address').execute();
}
