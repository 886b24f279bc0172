import type { Kysely } from 'kysely';

// A subscription's PDA is derived from its wallet, so the wallet's primary key already makes it unique. The second
// unique index made the upsert fail under concurrency: two writers of one new wallet (register and the chain pick-up,
// say) both passed ON CONFLICT's check on the wallet, and the later one then hit the PDA's index and got a unique
// violation instead of the update. A plain index keeps the look-up by PDA.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('subscriptions').dropConstraint('subscriptions_pda_key').execute();
  await db.schema.createIndex('subscriptions_pda').on('subscriptions').column('pda').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('subscriptions_pda').execute();
  await db.schema.alterTable('subscriptions').addUniqueConstraint('subscriptions_pda_key', ['pda']).execute();
}
