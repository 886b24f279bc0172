import type { Kysely } from 'kysely';

// An agent that exits before its first ready is booted again a few times (BOOT_RETRIES) before the instance fails
// (docs/decisions/0058-...): boot_retries counts the retries of the current start, back to 0 once its watch ends.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('instances')
    .addColumn('boot_retries', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('instances').dropColumn('boot_retries').execute();
}
