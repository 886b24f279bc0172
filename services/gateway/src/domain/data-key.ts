import { hkdfSync } from 'node:crypto';

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
