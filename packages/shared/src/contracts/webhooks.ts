import { z } from 'zod';
import { isoTime } from './common.ts';

// Outbound webhooks (Standard Webhooks): the gateway owns them (its schema, its durable consumers). These are the
// HTTP shapes of /webhooks; nothing here crosses NATS.

/** The event types an endpoint may subscribe to; each delivery's body is { type, timestamp, data }. */
export const eventType = z.enum([
  'instance.created',
  'instance.status',
  'instance.deleted',
  'subscription.registered',
  'subscription.renewed',
  'subscription.expiring',
  'subscription.expired',
  'subscription.cancelled',
  'keys.changed',
]);
export type EventType = z.infer<typeof eventType>;

/** What a delivery carries: an event type, or webhook.test, sent only when asked (POST /webhooks/{id}/test). */
export const deliveredType = z.enum([...eventType.options, 'webhook.test']);
export type DeliveredType = z.infer<typeof deliveredType>;

/** The body of every delivery, and the data of each event of GET /webhooks/events: the same bytes. */
export const eventPayload = z.object({
  type: deliveredType,
  timestamp: isoTime.describe('when the event happened'),
  data: z.record(z.string(), z.unknown()).describe("the event's fields (instance_id, status, key_names…), by type"),
});
export type EventPayload = z.infer<typeof eventPayload>;
/** The data of the `ready` event that opens a new GET /webhooks/events stream. */
export const liveReady = z.object({ at: isoTime });

export const webhookId = z.string().regex(/^wh_[A-Za-z0-9]{16,40}$/, 'must be a webhook id (wh_…)');
export const deliveryId = z.string().regex(/^msg_[A-Za-z0-9]{16,40}$/, 'must be a delivery id (msg_…)');

export const createBody = z.object({
  url: z.string().max(2048).describe('https URL of a public host; private, loopback and link-local targets are refused'),
  events: z.array(eventType).min(1).max(eventType.options.length).describe('the event types to deliver'),
  description: z.string().max(200).optional(),
});

export const webhookView = z.object({
  id: webhookId,
  url: z.string(),
  events: z.array(eventType),
  description: z.string().optional(),
  created_at: isoTime,
  /** While a rotation's overlap lasts, deliveries carry a signature by the previous secret too. */
  previous_secret_expires_at: isoTime.optional(),
});
export type WebhookView = z.infer<typeof webhookView>;

export const webhookCreated = webhookView.extend({
  secret: z
    .string()
    .regex(/^whsec_/)
    .describe('the signing secret (Standard Webhooks), shown only in this answer'),
});
export const webhookList = z.object({ webhooks: z.array(webhookView) });
export const webhookDeleted = z.object({ success: z.boolean(), id: webhookId });
export const webhookRotated = z.object({
  id: webhookId,
  secret: z
    .string()
    .regex(/^whsec_/)
    .describe('the new signing secret, shown only in this answer'),
  previous_secret_expires_at: isoTime.describe('until then the old secret signs too (a second v1 signature)'),
});

export const deliveryView = z.object({
  id: deliveryId.describe('the webhook-id header of the delivery (the same on every attempt)'),
  webhook_id: webhookId,
  event_type: deliveredType,
  status: z.enum(['pending', 'delivered', 'failed']).describe('failed: retries ended (24 h) or the payload was refused'),
  attempts: z.number().int(),
  last_status_code: z.number().int().optional().describe('the HTTP status of the last attempt'),
  last_error: z.string().optional().describe('why the last attempt failed without an HTTP status (e.g. timeout, refused address)'),
  next_attempt_at: isoTime.optional(),
  created_at: isoTime,
  delivered_at: isoTime.optional(),
});
export type DeliveryView = z.infer<typeof deliveryView>;
export const deliveryList = z.object({ deliveries: z.array(deliveryView) });
export const deliveriesQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).optional().describe('newest first, default 50') });
