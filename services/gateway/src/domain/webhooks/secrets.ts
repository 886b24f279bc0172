import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/** A Standard Webhooks signing secret: whsec_ and 24 random bytes in base64. */
export const newSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

/** The key that seals signing secrets: WEBHOOK_SECRETS_KEY, else derived from the gateway's assertion key (no new secret to deploy). */
export function secretsKey(config: { WEBHOOK_SECRETS_KEY?: string | undefined; GATEWAY_ASSERTION_PRIVATE_KEY?: string | undefined }): Buffer | undefined {
  if (config.WEBHOOK_SECRETS_KEY) return Buffer.from(config.WEBHOOK_SECRETS_KEY.trim(), 'base64');
  if (!config.GATEWAY_ASSERTION_PRIVATE_KEY) return undefined;
  return Buffer.from(hkdfSync('sha256', Buffer.from(config.GATEWAY_ASSERTION_PRIVATE_KEY), 'agenthost webhooks', 'webhook secrets v1', 32));
}

/**
 * AES-256-GCM with the endpoint id as AAD, so a sealed secret opens only for its own endpoint. The signing secret must
 * be read back to sign (it cannot be hashed), so it is kept sealed rather than plain in the database.
 */
export function sealSecret(key: Buffer, secret: string, webhookId: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(webhookId));
  const ct = Buffer.concat([c.update(secret, 'utf8'), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), ct]).toString('base64');
}

export function openSecret(key: Buffer, sealed: string, webhookId: string): string {
  const raw = Buffer.from(sealed, 'base64');
  const d = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12)).setAAD(Buffer.from(webhookId));
  d.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8');
}
