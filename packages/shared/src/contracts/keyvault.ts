import { z } from 'zod';
import { contract, userContract, userRead } from './contract.ts';
import { instanceId, isoTime, requestMeta, uuid } from './common.ts';

/** Bounds of stored keys (also enforced in keyvault; the per-instance count is configuration there). */
export const KEY_VALUE_MAX_BYTES = 8192;
export const KEYS_PER_CALL_MAX = 50;
/** Names with this prefix are the platform's own variables inside an instance (the bootstrap never injects them). */
export const RESERVED_KEY_PREFIX = 'AGENTHOST_';

const utf8 = new TextEncoder();

/** A key name is used as an environment variable name inside the instance. */
export const keyName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,99}$/, 'must be an environment variable name of at most 100 characters')
  .refine((n) => !n.toUpperCase().startsWith(RESERVED_KEY_PREFIX), `names starting with ${RESERVED_KEY_PREFIX} are reserved`)
  .refine((n) => n !== '__proto__', 'this name is reserved');

/** A key value: 1 to 8192 UTF-8 bytes, no NUL (it becomes an environment variable value). */
export const keyValue = z
  .string()
  .min(1, 'must not be empty')
  .max(KEY_VALUE_MAX_BYTES, `must be at most ${KEY_VALUE_MAX_BYTES} bytes`)
  .refine((v) => utf8.encode(v).length <= KEY_VALUE_MAX_BYTES, `must be at most ${KEY_VALUE_MAX_BYTES} bytes`)
  .refine((v) => !v.includes('\0'), 'must not contain a NUL character');

const meta = requestMeta.default({ ip: '', user_agent: '', request_id: '' });
const owned = z.object({ user_id: uuid, instance_id: instanceId, meta });

/**
 * Issue fresh credentials for an instance (at create, and each time its container is recreated):
 * a new instance secret (stored only as a hash; the previous one stops working) and the instance's
 * key, derived from the current master key (key_id names it). Records user_id as the instance's owner.
 * 409 CONFLICT when the instance id already belongs to another user.
 */
export const issueCredentials = contract(
  'keyvault.v1.credentials.issue',
  z.object({ user_id: uuid, instance_id: instanceId }),
  z.object({ instance_secret: z.string(), instance_key: z.string(), key_id: z.string() }),
);

/**
 * Provisioner only: an instance being deleted loses its keys and credentials now, before its delete
 * answers (events.instance.deleted does the same later, for a delete whose purge did not get through).
 */
export const purgeInstance = contract(
  'keyvault.v1.instance.purge',
  z.object({ user_id: uuid, instance_id: instanceId }),
  z.object({ keys_deleted: z.number().int() }),
);

/** The keys of one /keys/store call, as the client sends them (the gateway checks them, keyvault again once opened). */
export const storedKeys = z
  .record(keyName, keyValue)
  .refine((k) => Object.keys(k).length >= 1, 'must hold at least one key')
  .refine((k) => Object.keys(k).length <= KEYS_PER_CALL_MAX, `at most ${KEYS_PER_CALL_MAX} keys per call`);

/** The bodies of /keys/store and /keys/update as clients send them; the gateway seals the values before the bus. */
export const storeBody = z.object({ instance_id: instanceId, keys: storedKeys });
export const updateBody = z.object({ instance_id: instanceId, key_name: keyName, key_value: keyValue });

/** A sealed box (packages/shared seal.ts) to keyvault's public key: never plaintext on the bus. */
const sealedBox = z
  .string()
  .min(1)
  .max(2 * (KEY_VALUE_MAX_BYTES * KEYS_PER_CALL_MAX + 4096));

/** What a sealed value is bound to: the subject and the instance (and, for update, the key name). */
export const sealContext = (subject: string, instanceId: string, keyName = ''): string => `${subject}:${instanceId}:${keyName}`;

/**
 * Store several keys at once (a name that exists is replaced). sealed_keys: the JSON object of storedKeys,
 * sealed to keyvault. 404 INSTANCE_NOT_FOUND unless the caller owns the instance.
 */
export const store = userContract(
  'keyvault.v1.keys.store',
  owned.extend({ sealed_keys: sealedBox }),
  z.object({ success: z.boolean(), keys_stored: z.number().int(), instance_id: instanceId }),
);

/** Replace the value of an existing key (404 KEY_NOT_FOUND when it does not exist); sealed_value is the new value sealed to keyvault. The instance loads it at its next start. */
export const update = userContract(
  'keyvault.v1.keys.update',
  owned.extend({ key_name: keyName, sealed_value: sealedBox }),
  z.object({ success: z.boolean(), instance_id: instanceId, key_name: keyName, restart_required: z.boolean() }),
);

/** Delete keys by name; names that do not exist are ignored (keys_deleted counts the ones removed). */
export const remove = userContract(
  'keyvault.v1.keys.delete',
  owned.extend({ key_names: z.array(keyName).min(1).max(100) }),
  z.object({ success: z.boolean(), instance_id: instanceId, keys_deleted: z.number().int() }),
);

/** Names (never values) of an instance's keys, for its owner. */
export const list = userRead(
  'keyvault.v1.keys.list',
  owned,
  z.object({ instance_id: instanceId, keys: z.array(z.object({ key_name: keyName, created_at: isoTime, updated_at: isoTime })) }),
);

/**
 * Instance side: authenticated by instance id + secret, returns every key's ciphertext sealed for that
 * instance's current credentials. The fields are only length-checked: a malformed id or secret is an
 * authentication failure (401, counted and rate limited), not a 400.
 */
export const retrieve = contract(
  'keyvault.v1.keys.retrieve',
  z.object({ instance_id: z.string().max(100), instance_secret: z.string().max(200), meta }),
  z.object({ keys: z.record(z.string(), z.string()) }),
);

export const auditAction = z.enum(['key_stored', 'key_updated', 'key_deleted', 'key_retrieved']);

/** Spec §2.4: metadata only. key_length is the value's length in UTF-8 bytes. */
export const auditRecord = z.object({
  timestamp: isoTime,
  user_id: uuid,
  instance_id: instanceId,
  action: auditAction,
  key_name: z.string(),
  key_length: z.number().int(),
  ip_address: z.string(),
  user_agent: z.string(),
});

/** Audit records of an instance, newest first, for its owner. */
export const audit = userRead(
  'keyvault.v1.audit.list',
  owned.extend({ limit: z.coerce.number().int().min(1).max(1000).default(100) }),
  z.object({ instance_id: instanceId, records: z.array(auditRecord) }),
);
