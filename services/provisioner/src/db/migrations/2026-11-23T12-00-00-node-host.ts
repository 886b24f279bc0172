import type { Kysely } from 'kysely';

// The swarm driver pins an instance to a node (its volume lives there): its URL and readiness probe use
// that node's address.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('instances').addColumn('node_host', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('instances').dropColumn('node_host').execute();
}
