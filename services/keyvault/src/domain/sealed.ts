import { z } from 'zod';
import { contracts, parseOr400, SealOpenError, validationError, type SealOpener } from '@agenthost/shared';

// Provider keys arrive sealed to keyvault's public key (the gateway seals them; packages/shared seal.ts):
// they are opened here, in memory, and checked as the client's plaintext would have been.

const kv = contracts.keyvault;

function open(opener: SealOpener, box: string, context: string, field: string): string {
  try {
    return opener.open(box, context);
  } catch (err) {
    if (err instanceof SealOpenError) throw validationError(field, 'cannot be opened by keyvault (not sealed to its public key for this instance)');
    throw err;
  }
}

/** The keys of a store request, opened and validated (400 naming the key on a bad one). */
export function openStoredKeys(opener: SealOpener, input: { instance_id: string; sealed_keys: string }): Record<string, string> {
  const text = open(opener, input.sealed_keys, kv.sealContext(kv.store.subject, input.instance_id), 'sealed_keys');
  let keys: unknown;
  try {
    keys = JSON.parse(text);
  } catch {
    throw validationError('sealed_keys', 'does not hold a JSON object of keys');
  }
  return parseOr400(z.object({ keys: kv.storedKeys }), { keys }).keys;
}

/** The new value of an update request, opened and validated. */
export function openKeyValue(opener: SealOpener, input: { instance_id: string; key_name: string; sealed_value: string }): string {
  const value = open(opener, input.sealed_value, kv.sealContext(kv.update.subject, input.instance_id, input.key_name), 'sealed_value');
  return parseOr400(z.object({ key_value: kv.keyValue }), { key_value: value }).key_value;
}
