import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * The key that seals what the gateway keeps in its schema and that holds a secret: webhook signing secrets (they must
 * be read back to sign, so they cannot be hashed) and the kept answers of Idempotency-Key requests (a create's answer
 * carries the instance's access token). GATEWAY_DATA_KEY, else derived from the gateway's assertion key, so a
 * deployment has no new secret to manage; undefined when neither is set (assertions off, e.g. a benchmark).
 */
export function gatewayDataKey(config: { GATEWAY_DATA_KEY?: string | undefined; GATEWAY_ASSERTION_PRIVATE_KEY?: string | undefined }): Buffer | undefined {
  if (config.GATEWAY_DATA_KEY) return Buffer.from(config.GATEWAY_DATA_KEY.trim(), 'base64');
  if (!config.GATEWAY_ASSERTION_PRIVATE_KEY) return undefined;
  // The info label is the one the first (webhooks-only) version used, so secrets sealed by it still open.
  return Buffer.from(hkdfSync('sha256', Buffer.from(config.GATEWAY_ASSERTION_PRIVATE_KEY), 'agenthost webhooks', 'webhook secrets v1', 32));
}

/** AES-256-GCM; `aad` binds the sealed text to its row (an endpoint id, a user and key), so it opens nowhere else. */
export function sealText(key: Buffer, text: string, aad: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(aad));
  const ct = Buffer.concat([c.update(text, 'utf8'), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), ct]).toString('base64');
}

/** Throws when the text was sealed under another key or for another row, or was altered. */
export function openText(key: Buffer, sealed: string, aad: string): string {
  const raw = Buffer.from(sealed, 'base64');
  const d = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12)).setAAD(Buffer.from(aad));
  d.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8');
}
