// The instance's side of the vault: credentials issued for its container, the keys it fetches with them, and what
// goes when it is deleted. The owner's side (store, update, delete, list, audit) is in vault.ts.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { AppError, contracts } from '@agenthost/shared';
import { hashSecret, newInstanceSecret, parseSealed, SealError, secretMatches, serializeSealed } from './crypto.ts';
import { observeAuthFailure } from '../metrics.ts';
import { lengthOf, writeAudit, type AuditEntry, type RequestMeta, type VaultDeps } from './vault.ts';

/** Fresh credentials for an instance: a new secret (the old one stops working) and its derived key. */
export async function issueCredentials(deps: VaultDeps, input: { user_id: string; instance_id: string }) {
  const secret = newInstanceSecret();
  const keyId = deps.keyring.currentId;
  const epoch = randomBytes(16);
  const row = await deps.db
    .insertInto('instances')
    .values({ instance_id: input.instance_id, user_id: input.user_id, secret_hash: hashSecret(secret), key_id: keyId, key_epoch: epoch, issued_at: new Date() })
    .onConflict((oc) =>
      oc
        .column('instance_id')
        .doUpdateSet({
          secret_hash: (eb) => eb.ref('excluded.secret_hash'),
          key_id: (eb) => eb.ref('excluded.key_id'),
          key_epoch: (eb) => eb.ref('excluded.key_epoch'),
          issued_at: sql<Date>`now()`,
        })
        .where('instances.user_id', '=', input.user_id),
    )
    .returning('instance_id')
    .executeTakeFirst();
  if (!row) throw new AppError('CONFLICT', 'Instance id belongs to another user');
  await deps.limiter.reset(input.instance_id);
  const key = deps.keyring.instanceKey(input.instance_id, keyId, epoch);
  const instanceKey = key.toString('base64');
  key.fill(0);
  deps.log.info({ event: 'credentials_issued', instance_id: input.instance_id, user_id: input.user_id, key_id: keyId }, 'instance credentials issued');
  return { instance_secret: secret, instance_key: instanceKey, key_id: keyId };
}

/**
 * Instance side. Authenticates the instance (rate limited per source IP and per instance id; every
 * failure is the same 401, counted and logged with its reason), then returns every key sealed for the
 * master key the instance's credentials were issued under, re-sealing in memory the ones stored under
 * another (rotation not yet re-sealed). One audit record per key returned.
 */
export async function retrieveKeys(deps: VaultDeps, input: { instance_id: string; instance_secret: string; meta: RequestMeta }) {
  const { instance_id, instance_secret, meta } = input;
  const idValid = contracts.instanceId.safeParse(instance_id).success;
  const ipBucket = `ip:${meta.ip || 'unknown'}`;
  const buckets = [ipBucket, ...(idValid ? [`instance:${instance_id}`] : [])];
  const fields = { ...(idValid ? { instance_id } : { instance_id_valid: false }), ip: meta.ip, request_id: meta.request_id };
  // Instance ids are public (they are in URLs): a flood of wrong secrets for one id must not lock the
  // instance out of its keys. So the per-instance budget only refuses wrong secrets; the right one
  // is refused only when its own address is over its budget.
  await deps.limiter.check([ipBucket], fields);

  const inst =
    idValid && instance_secret !== ''
      ? await deps.db
          .selectFrom('instances')
          .select(['user_id', 'key_id', 'secret_hash', 'key_epoch'])
          .where('instance_id', '=', instance_id)
          .executeTakeFirst()
      : undefined;
  const matches = secretMatches(instance_secret, inst?.secret_hash ?? null);
  if (!inst || !matches) {
    const reason = !idValid ? 'malformed_instance_id' : instance_secret === '' ? 'missing_secret' : !inst ? 'unknown_instance' : 'wrong_secret';
    await deps.limiter.check(buckets, fields);
    await deps.limiter.fail(buckets, { ...fields, reason });
    observeAuthFailure(reason);
    throw new AppError('INSTANCE_UNAUTHORIZED');
  }
  if (!deps.keyring.has(inst.key_id)) {
    deps.log.error(
      { event: 'instance_credentials_stale', instance_id, key_id: inst.key_id },
      'instance credentials were issued under a master key no longer in the keyring',
    );
    throw new AppError('INSTANCE_CREDENTIALS_STALE');
  }

  const rows = await deps.db
    .selectFrom('api_keys')
    .select(['key_name', 'encrypted_value', 'kid'])
    .where('instance_id', '=', instance_id)
    .orderBy('key_name')
    .execute();
  const keys: Record<string, string> = {};
  const audit: AuditEntry[] = [];
  let resealed = 0;
  for (const r of rows) {
    try {
      if (inst.key_epoch) {
        // Sealed for this issue's key: a key of an earlier issue (a leaked one) opens none of it.
        keys[r.key_name] = serializeSealed(deps.keyring.sealForIssue(instance_id, r.key_name, parseSealed(r.encrypted_value), inst.key_id, inst.key_epoch));
        if (r.kid !== inst.key_id) resealed++;
      } else if (r.kid === inst.key_id) {
        keys[r.key_name] = r.encrypted_value;
      } else {
        keys[r.key_name] = serializeSealed(deps.keyring.reseal(instance_id, r.key_name, parseSealed(r.encrypted_value), inst.key_id));
        resealed++;
      }
    } catch (err) {
      deps.log.error(
        { event: 'key_unreadable', instance_id, key_name: r.key_name, kid: r.kid, problem: err instanceof SealError ? err.message : 'unexpected' },
        'stored key cannot be opened',
      );
      throw new AppError('INTERNAL');
    }
    audit.push({ action: 'key_retrieved', key_name: r.key_name, key_length: lengthOf(r.encrypted_value) });
  }
  await writeAudit(deps.db, inst.user_id, instance_id, meta, audit);
  deps.log.info({ event: 'keys_retrieved', instance_id, key_names: Object.keys(keys), resealed_in_memory: resealed }, 'keys retrieved by instance');
  return { keys };
}

/**
 * An instance is deleted (keyvault.v1.instance.purge from the provisioner, then events.instance.deleted), or a
 * create its user never saw is undone (the purge alone: no event announces the end of an instance nobody was told
 * of; docs/decisions/0053-a-refused-create-purges-its-keys.md): its keys and credentials go; audit records stay
 * (metadata only). Idempotent.
 */
export async function instanceDeleted(deps: VaultDeps, ev: { instance_id: string; user_id: string }): Promise<{ keys_deleted: number }> {
  const removed = await deps.db.transaction().execute(async (trx) => {
    const inst = await trx.selectFrom('instances').select('user_id').where('instance_id', '=', ev.instance_id).forUpdate().executeTakeFirst();
    if (!inst) return null;
    if (inst.user_id !== ev.user_id) {
      deps.log.error({ event: 'instance_deleted_owner_mismatch', instance_id: ev.instance_id }, 'ignoring instance deletion: owner does not match');
      return null;
    }
    const keys = await trx.deleteFrom('api_keys').where('instance_id', '=', ev.instance_id).returning(['key_name', 'encrypted_value']).execute();
    await trx.deleteFrom('instances').where('instance_id', '=', ev.instance_id).execute();
    await writeAudit(
      trx,
      ev.user_id,
      ev.instance_id,
      { ip: '', user_agent: 'agenthost/instance-deleted', request_id: '' },
      keys.map((k) => ({ action: 'key_deleted', key_name: k.key_name, key_length: lengthOf(k.encrypted_value) })),
    );
    return keys.map((k) => k.key_name);
  });
  await deps.limiter.reset(ev.instance_id);
  if (removed)
    deps.log.info(
      { event: 'instance_keys_purged', instance_id: ev.instance_id, keys_deleted: removed.length },
      'instance deleted: keys and credentials removed',
    );
  return { keys_deleted: removed?.length ?? 0 };
}
