import { z } from 'zod';
import { contract } from './contract.ts';
import { instanceId, isoTime, requestMeta, uuid } from './common.ts';

/** A key name is used as an environment variable name inside the instance. */
export const keyName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,99}$/, 'must be an environment variable name of at most 100 characters');
export const keyValue = z.string().min(1).max(8192);

const owned = z.object({ user_id: uuid, instance_id: instanceId, meta: requestMeta.default({ ip: '', user_agent: '', request_id: '' }) });

/**
 * Issue fresh credentials for an instance (at create, and each time its container is recreated):
 * a new instance secret (stored only as a hash) and the instance's derived key.
 */
export const issueCredentials = contract(
  'keyvault.v1.credentials.issue',
  z.object({ user_id: uuid, instance_id: instanceId }),
  z.object({ instance_secret: z.string(), instance_key: z.string(), key_id: z.string() }),
);

export const store = contract(
  'keyvault.v1.keys.store',
  owned.extend({ keys: z.record(keyName, keyValue) }),
  z.object({ success: z.boolean(), keys_stored: z.number().int(), instance_id: instanceId }),
);

export const update = contract(
  'keyvault.v1.keys.update',
  owned.extend({ key_name: keyName, key_value: keyValue }),
  z.object({ success: z.boolean(), instance_id: instanceId, key_name: keyName, restart_required: z.boolean() }),
);

export const remove = contract(
  'keyvault.v1.keys.delete',
  owned.extend({ key_names: z.array(keyName).min(1).max(100) }),
  z.object({ success: z.boolean(), instance_id: instanceId, keys_deleted: z.number().int() }),
);

/** Names (never values) of an instance's keys, for its owner. */
export const list = contract(
  'keyvault.v1.keys.list',
  owned,
  z.object({ instance_id: instanceId, keys: z.array(z.object({ key_name: keyName, created_at: isoTime, updated_at: isoTime })) }),
);

/** Instance side: authenticated by instance id + secret, returns ciphertexts sealed for that instance. */
export const retrieve = contract(
  'keyvault.v1.keys.retrieve',
  z.object({ instance_id: instanceId, instance_secret: z.string().min(1).max(200), meta: requestMeta.default({ ip: '', user_agent: '', request_id: '' }) }),
  z.object({ keys: z.record(keyName, z.string()) }),
);

export const auditRecord = z.object({
  timestamp: isoTime,
  user_id: uuid,
  instance_id: instanceId,
  action: z.enum(['key_stored', 'key_updated', 'key_deleted', 'key_retrieved']),
  key_name: z.string(),
  key_length: z.number().int(),
  ip_address: z.string(),
  user_agent: z.string(),
});

export const audit = contract(
  'keyvault.v1.audit.list',
  owned.extend({ limit: z.coerce.number().int().min(1).max(1000).default(100) }),
  z.object({ instance_id: instanceId, records: z.array(auditRecord) }),
);
