import { type Kysely, type Migration, sql } from 'kysely';
import { openKeeperKey, sealKeeperKey } from '../../domain/keeper-key.ts';

// The generated keeper key was kept in clear (keeper_keys.secret_key): it is sealed under billing-chain's data key
// (domain/keeper-key.ts) into sealed_key, and the clear column goes. A row to seal with no key fails the migration,
// so billing-chain does not start and the clear row is left as it was.
export function sealKeeperKeys(key: Buffer | undefined): Migration {
  const needKey = () => {
    if (!key) throw new Error('billing.keeper_keys holds a keeper key in clear and there is no key to seal it: set BILLING_DATA_KEY(_FILE)');
    return key;
  };
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable('keeper_keys').addColumn('sealed_key', 'text').execute();
      const { rows } = await sql<{ id: number; secret_key: string }>`select id, secret_key from keeper_keys`.execute(db);
      for (const r of rows) await sql`update keeper_keys set sealed_key = ${sealKeeperKey(needKey(), r.id, r.secret_key)} where id = ${r.id}`.execute(db);
      await db.schema.alterTable('keeper_keys').dropColumn('secret_key').execute();
      await db.schema
        .alterTable('keeper_keys')
        .alterColumn('sealed_key', (c) => c.setNotNull())
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable('keeper_keys').addColumn('secret_key', 'text').execute();
      const { rows } = await sql<{ id: number; sealed_key: string }>`select id, sealed_key from keeper_keys`.execute(db);
      for (const r of rows) await sql`update keeper_keys set secret_key = ${openKeeperKey(needKey(), r.id, r.sealed_key)} where id = ${r.id}`.execute(db);
      await db.schema.alterTable('keeper_keys').dropColumn('sealed_key').execute();
      await db.schema
        .alterTable('keeper_keys')
        .alterColumn('secret_key', (c) => c.setNotNull())
        .execute();
    },
  };
}
