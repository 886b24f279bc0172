import type { Kysely } from 'kysely';

// Each issue of instance credentials gets a random epoch mixed into the instance key, so a key that
// leaked dies with the next restart. Rows issued before this have none (their key is the old derivation)
// until their next issue.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('instances').addColumn('key_epoch', 'bytea').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('instances').dropColumn('key_epoch').execute();
}
