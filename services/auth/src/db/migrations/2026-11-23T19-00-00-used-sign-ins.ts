import type { Kysely } from 'kysely';

// A wallet-built sign-in message without our nonce is accepted once: its signature's hash is kept until the
// message would be too old anyway.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('used_sign_ins')
    .addColumn('signature_hash', 'text', (c) => c.primaryKey())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('used_sign_ins').execute();
}
