import { sql, type Kysely, type Transaction } from 'kysely';
import { AppError, type contracts, keyHint, type Logger, type SealOpener } from '@agenthost/shared';
import type { AuditAction, KeyvaultDB } from '../db/schema.ts';
import { type Keyring, parseSealed, plaintextBytes, serializeSealed } from './crypto.ts';
import type { AuthLimiter } from './limiter.ts';
import { openKeyValue, openStoredKeys } from './sealed.ts';

export type Db = Kysely<KeyvaultDB> | Transaction<KeyvaultDB>;
export type RequestMeta = contracts.RequestMeta;

export interface VaultDeps {
  db: Kysely<KeyvaultDB>;
  keyring: Keyring;
  limiter: AuthLimiter;
  /** Opens the provider keys the gateway sealed to keyvault's public key. */
  opener: SealOpener;
  log: Logger;
  maxKeysPerInstance: number;
}

const utf8Bytes = (s: string): number => Buffer.byteLength(s, 'utf8');
const notFound = () => new AppError('INSTANCE_NOT_FOUND');

/** The instance row when user owns it (locked for the transaction when lock), else 404 INSTANCE_NOT_FOUND. */
async function ownedInstance(db: Db, userId: string, instanceId: string, lock = false) {
  let q = db.selectFrom('instances').select(['instance_id', 'user_id', 'key_id']).where('instance_id', '=', instanceId).where('user_id', '=', userId);
  if (lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  if (!row) throw notFound();
  return row;
}

export interface AuditEntry {
  action: AuditAction;
  key_name: string;
  key_length: number;
}

export async function writeAudit(db: Db, userId: string, instanceId: string, meta: RequestMeta, entries: AuditEntry[]): Promise<void> {
  if (entries.length === 0) return;
  await db
    .insertInto('audit_log')
    .values(
      entries.map((e) => ({
        user_id: userId,
        instance_id: instanceId,
        action: e.action,
        key_name: e.key_name,
        key_length: e.key_length,
        ip_address: meta.ip,
        user_agent: meta.user_agent,
        request_id: meta.request_id,
      })),
    )
    .execute();
}

export async function storeKeys(deps: VaultDeps, input: { user_id: string; instance_id: string; sealed_keys: string; meta: RequestMeta }) {
  const { user_id, instance_id, meta } = input;
  const keys = openStoredKeys(deps.opener, input);
  const names = Object.keys(keys);
  const existing = await deps.db.transaction().execute(async (trx) => {
    await ownedInstance(trx, user_id, instance_id, true);
    const have = new Set((await trx.selectFrom('api_keys').select('key_name').where('instance_id', '=', instance_id).execute()).map((r) => r.key_name));
    const total = new Set([...have, ...names]).size;
    if (total > deps.maxKeysPerInstance) {
      throw new AppError('KEY_LIMIT_EXCEEDED', `An instance holds at most ${deps.maxKeysPerInstance} keys (this call would make ${total})`);
    }
    const rows = names.map((n) => ({ user_id, instance_id, key_name: n, encrypted_value: serializeSealed(deps.keyring.seal(instance_id, n, keys[n]!)) }));
    await trx
      .insertInto('api_keys')
      .values(rows)
      .onConflict((oc) =>
        oc.columns(['instance_id', 'key_name']).doUpdateSet({ encrypted_value: (eb) => eb.ref('excluded.encrypted_value'), updated_at: sql<Date>`now()` }),
      )
      .execute();
    await writeAudit(
      trx,
      user_id,
      instance_id,
      meta,
      names.map((n) => ({ action: have.has(n) ? 'key_updated' : 'key_stored', key_name: n, key_length: utf8Bytes(keys[n]!) })),
    );
    return have;
  });
  deps.log.info(
    { event: 'keys_stored', instance_id, user_id, stored: names.map((n) => ({ name: n, hint: keyHint(keys[n]!), replaced: existing.has(n) })) },
    'keys stored',
  );
  return { success: true, keys_stored: names.length, instance_id };
}

export async function updateKey(deps: VaultDeps, input: { user_id: string; instance_id: string; key_name: string; sealed_value: string; meta: RequestMeta }) {
  const { user_id, instance_id, key_name, meta } = input;
  const key_value = openKeyValue(deps.opener, input);
  await deps.db.transaction().execute(async (trx) => {
    await ownedInstance(trx, user_id, instance_id, true);
    const res = await trx
      .updateTable('api_keys')
      .set({ encrypted_value: serializeSealed(deps.keyring.seal(instance_id, key_name, key_value)), updated_at: sql<Date>`now()` })
      .where('instance_id', '=', instance_id)
      .where('key_name', '=', key_name)
      .returning('id')
      .executeTakeFirst();
    if (!res) throw new AppError('KEY_NOT_FOUND', `No key named ${key_name} for this instance`);
    await writeAudit(trx, user_id, instance_id, meta, [{ action: 'key_updated', key_name, key_length: utf8Bytes(key_value) }]);
  });
  deps.log.info({ event: 'key_updated', instance_id, user_id, key_name, hint: keyHint(key_value) }, 'key updated');
  return { success: true, instance_id, key_name, restart_required: true };
}

export async function deleteKeys(deps: VaultDeps, input: { user_id: string; instance_id: string; key_names: string[]; meta: RequestMeta }) {
  const { user_id, instance_id, meta } = input;
  const names = [...new Set(input.key_names)];
  const deleted = await deps.db.transaction().execute(async (trx) => {
    await ownedInstance(trx, user_id, instance_id, true);
    const rows = await trx
      .deleteFrom('api_keys')
      .where('instance_id', '=', instance_id)
      .where('key_name', 'in', names)
      .returning(['key_name', 'encrypted_value'])
      .execute();
    await writeAudit(
      trx,
      user_id,
      instance_id,
      meta,
      rows.map((r) => ({ action: 'key_deleted', key_name: r.key_name, key_length: lengthOf(r.encrypted_value) })),
    );
    return rows.map((r) => r.key_name);
  });
  deps.log.info({ event: 'keys_deleted', instance_id, user_id, key_names: deleted }, 'keys deleted');
  return { success: true, instance_id, keys_deleted: deleted.length };
}

export async function listKeys(deps: VaultDeps, input: { user_id: string; instance_id: string }) {
  await ownedInstance(deps.db, input.user_id, input.instance_id);
  const rows = await deps.db
    .selectFrom('api_keys')
    .select(['key_name', 'created_at', 'updated_at'])
    .where('instance_id', '=', input.instance_id)
    .orderBy('key_name')
    .execute();
  return {
    instance_id: input.instance_id,
    keys: rows.map((r) => ({ key_name: r.key_name, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString() })),
  };
}

export async function listAudit(deps: VaultDeps, input: { user_id: string; instance_id: string; limit: number }) {
  await ownedInstance(deps.db, input.user_id, input.instance_id);
  const rows = await deps.db
    .selectFrom('audit_log')
    .selectAll()
    .where('instance_id', '=', input.instance_id)
    .where('user_id', '=', input.user_id)
    .orderBy('at', 'desc')
    .orderBy('id', 'desc')
    .limit(input.limit)
    .execute();
  return {
    instance_id: input.instance_id,
    records: rows.map((r) => ({
      timestamp: r.at.toISOString(),
      user_id: r.user_id,
      instance_id: r.instance_id,
      action: r.action,
      key_name: r.key_name,
      key_length: r.key_length,
      ip_address: r.ip_address,
      user_agent: r.user_agent,
    })),
  };
}

export function lengthOf(encryptedValue: string): number {
  try {
    return plaintextBytes(parseSealed(encryptedValue));
  } catch {
    return 0;
  }
}
