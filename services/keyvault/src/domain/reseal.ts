import { sql, type Kysely } from 'kysely';
import type { Logger } from '@agenthost/shared';
import type { KeyvaultDB } from '../db/schema.ts';
import { parseSealed, SealError, serializeSealed, type Keyring } from './crypto.ts';

export interface ResealReport {
  current_key_id: string;
  resealed: number;
  failed: number;
  /** Stored keys per master key id after the run (all under the current one when failed = 0). */
  keys_by_key_id: Record<string, number>;
  /** Instances whose running containers hold a key derived from each master key id. Instances under an
   *  older id keep working while that id stays in the keyring; restarting them issues current credentials. */
  instances_by_key_id: Record<string, number>;
}

/**
 * Re-seal every stored key that is not under the current master key. Row by row, each in its own short
 * transaction holding only that row's lock, so it runs while keyvault serves; a row changed meanwhile is
 * simply re-read, and a second run finds nothing to do (idempotent).
 */
export async function resealAll(db: Kysely<KeyvaultDB>, keyring: Keyring, log: Logger, batchSize = 200): Promise<ResealReport> {
  const current = keyring.currentId;
  let resealed = 0;
  let failed = 0;
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    const batch = await db.selectFrom('api_keys').select('id').where('kid', '<>', current).where('id', '>', after).orderBy('id').limit(batchSize).execute();
    if (batch.length === 0) break;
    for (const { id } of batch) {
      after = id;
      try {
        const done = await db.transaction().execute(async (trx) => {
          const row = await trx
            .selectFrom('api_keys')
            .select(['instance_id', 'key_name', 'encrypted_value', 'kid'])
            .where('id', '=', id)
            .forUpdate()
            .executeTakeFirst();
          if (!row || row.kid === current) return false;
          const next = keyring.reseal(row.instance_id, row.key_name, parseSealed(row.encrypted_value), current);
          await trx
            .updateTable('api_keys')
            .set({ encrypted_value: serializeSealed(next) })
            .where('id', '=', id)
            .execute();
          return true;
        });
        if (done) resealed++;
      } catch (err) {
        failed++;
        log.error(
          { event: 'reseal_failed', key_row: id, problem: err instanceof SealError ? err.message : String((err as Error)?.message ?? err) },
          'could not re-seal a key',
        );
      }
    }
  }
  const count = async (table: 'api_keys' | 'instances', col: 'kid' | 'key_id') => {
    const rows = await db
      .selectFrom(table)
      .select([sql<string>`${sql.ref(col)}`.as('k'), sql<number>`count(*)::int`.as('n')])
      .groupBy(sql.ref(col))
      .execute();
    return Object.fromEntries(rows.map((r) => [r.k, r.n]));
  };
  return { current_key_id: current, resealed, failed, keys_by_key_id: await count('api_keys', 'kid'), instances_by_key_id: await count('instances', 'key_id') };
}
