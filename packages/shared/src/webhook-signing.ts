import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

// Standard Webhooks signing, in one place for the gateway's deliveries and the CLI's `webhooks listen`, so a
// receiver that verifies one verifies the other. No other import: the CLI loads this file alone
// (`@agenthost/shared/webhook-signing`), not the services' bus and database code.

/** A Standard Webhooks signing secret: whsec_ and 24 random bytes in base64. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

/** webhook-signature: one v1 signature per valid secret, space-separated (Standard Webhooks), so a rotation overlaps. */
export function webhookSignatures(secrets: string[], msgId: string, at: Date, body: string): string {
  return secrets.map((s) => new Webhook(s).sign(msgId, at, body)).join(' ');
}

/** The headers of one signed delivery of `body`. */
export function webhookHeaders(msgId: string, at: Date, signature: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': msgId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': signature,
  };
}
