import type { Kysely } from 'kysely';

// The expires_at a subscription was last announced as expiring for (events.subscription.expiring), so each period is
// announced once, by whichever replica holds the jobs lease.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('subscriptions').addColumn('expiry_warned_for', 'timestamptz').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('subscriptions').dropColumn('expiry_warned_for').execute();
}
