import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

// A secret a service must read back (so cannot hash) is kept in its schema sealed under a key of that service alone:
// whoever reads the database (a dump, a backup, the database's admin) gets no usable secret.
// sealed = base64(IV (12) | GCM tag (16) | ciphertext), AES-256-GCM; the AAD names the row the value belongs to, so a
// sealed value copied to another row does not open.

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A 256-bit key from its base64 form, or what is wrong with it (never echoing it). */
export function atRestKey(b64: string): { key: Buffer } | { problem: string } {
  const key = Buffer.from(b64.trim(), 'base64');
  if (key.length !== 32 || key.toString('base64') !== b64.trim()) return { problem: 'must be base64 of 32 bytes (e.g. `openssl rand -base64 32`)' };
  return { key };
}

/** AES-256-GCM under `key`, bound to `aad` (the row the value belongs to). */
export function sealAtRest(key: Buffer, text: string, aad: string): string {
  const iv = randomBytes(IV_BYTES);
  const c = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES }).setAAD(Buffer.from(aad, 'utf8'));
  const ct = Buffer.concat([c.update(text, 'utf8'), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), ct]).toString('base64');
}

/** The text; throws when it was sealed under another key or for another row, or was altered. */
export function openAtRest(key: Buffer, sealed: string, aad: string): string {
  const raw = Buffer.from(sealed, 'base64');
  if (raw.length < IV_BYTES + TAG_BYTES) throw new Error('not a sealed value');
  const d = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES }).setAAD(Buffer.from(aad, 'utf8'));
  d.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([d.update(raw.subarray(IV_BYTES + TAG_BYTES)), d.final()]).toString('utf8');
}
