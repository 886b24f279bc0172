import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { NatsConnection } from 'nats';
import type { z } from 'zod';
import { consumeEvents, contracts, DURABLES, type EventContract, type Logger, type Subscription } from '@agenthost/shared';
import type { GatewayDB } from '../../db/schema.ts';

const P = contracts.provisioner;
const B = contracts.billing;
type EventType = contracts.webhooks.EventType;
type DeliveredType = contracts.webhooks.DeliveredType;

/** One bus event as webhooks see it: whose it is, its type, when it happened, and the data a receiver gets. */
export interface WebhookEvent {
  user_id: string;
  type: EventType;
  at: string;
  data: Record<string, unknown>;
}

const SUBSCRIPTION_TYPES: Record<string, EventType | undefined> = {
  registered: 'subscription.registered',
  // A subscribe the pick-up saw without a register call is a registration too.
  picked_up: 'subscription.registered',
  renewed: 'subscription.renewed',
  expired: 'subscription.expired',
  cancelled: 'subscription.cancelled',
};

function subscriptionData(p: z.output<typeof B.subscriptionChanged.payload> | z.output<typeof B.subscriptionExpiring.payload>): Record<string, unknown> {
  const { user_id: _user, refreshed_at: _refreshed, ...rest } = p as Record<string, unknown>;
  return rest;
}

/**
 * Each delivered subject: its gateway durable and how its payload becomes a webhook event (undefined: not one).
 * keys.changed carries key names only: the contract has no field for a value, and only the fields named here go out.
 */
const SOURCES: Array<{ contract: EventContract; durable: string; map: (p: never) => WebhookEvent | undefined }> = [
  source(P.instanceCreated, DURABLES.gatewayWebhooksInstanceCreated, (p) => ({
    user_id: p.user_id,
    type: 'instance.created',
    at: p.created_at,
    data: { instance_id: p.instance_id, created_at: p.created_at },
  })),
  source(P.instanceStatusChanged, DURABLES.gatewayWebhooksInstanceStatus, (p) => {
    const { user_id, ...data } = p;
    return { user_id, type: 'instance.status', at: p.at, data };
  }),
  source(P.instanceDeleted, DURABLES.gatewayWebhooksInstanceDeleted, (p) => ({
    user_id: p.user_id,
    type: 'instance.deleted',
    at: p.deleted_at,
    data: { instance_id: p.instance_id, deleted_at: p.deleted_at },
  })),
  source(B.subscriptionChanged, DURABLES.gatewayWebhooksSubscriptionChanged, (p) => {
    const type = SUBSCRIPTION_TYPES[p.reason];
    return type && p.user_id ? { user_id: p.user_id, type, at: p.refreshed_at, data: subscriptionData(p) } : undefined;
  }),
  source(B.subscriptionExpiring, DURABLES.gatewayWebhooksSubscriptionExpiring, (p) =>
    p.user_id ? { user_id: p.user_id, type: 'subscription.expiring', at: p.refreshed_at, data: subscriptionData(p) } : undefined,
  ),
  source(contracts.keys.keysChanged, DURABLES.gatewayWebhooksKeysChanged, (p) => ({
    user_id: p.user_id,
    type: 'keys.changed',
    at: p.at,
    data: { instance_id: p.instance_id, action: p.action, key_names: p.key_names, applied: p.applied, ...(p.reason ? { reason: p.reason } : {}), at: p.at },
  })),
];

/** The body of a delivery ({ type, timestamp, data }): the one builder, so every delivery and the live stream carry the same bytes. */
export const deliveryBody = (ev: { type: DeliveredType; at: string; data: Record<string, unknown> }): string =>
  JSON.stringify({ type: ev.type, timestamp: ev.at, data: ev.data } satisfies contracts.webhooks.EventPayload);

/** The webhook event of an event read from the stream (undefined: not one, or a payload that breaks its contract). */
export function webhookEventOf(subject: string, payload: unknown): WebhookEvent | undefined {
  const s = SOURCES.find((x) => x.contract.subject === subject);
  const p = s?.contract.payload.safeParse(payload);
  return s && p?.success ? s.map(p.data as never) : undefined;
}

function source<C extends EventContract>(contract: C, durable: string, map: (p: z.output<C['payload']>) => WebhookEvent | undefined) {
  return { contract, durable, map: map as (p: never) => WebhookEvent | undefined };
}

/**
 * Turns bus events into delivery rows. Each subject is read by one durable consumer that every gateway replica shares,
 * so each event reaches one replica; its rows are keyed by event and endpoint, so a redelivered event adds nothing.
 * An event older than an endpoint is not sent to it (a new durable starts from the stream's beginning).
 */
export class WebhookFanout {
  private readonly subs: Subscription[] = [];
  private readonly db: Kysely<GatewayDB>;
  private readonly opts: { log: Logger; retryMs: number; maxPayloadBytes: number; wake: () => void };

  constructor(db: Kysely<GatewayDB>, opts: { log: Logger; retryMs: number; maxPayloadBytes: number; wake: () => void }) {
    this.db = db;
    this.opts = opts;
  }

  async start(nc: NatsConnection): Promise<void> {
    for (const s of SOURCES) {
      const key = (p: unknown) => createHash('sha256').update(s.contract.subject).update(JSON.stringify(p)).digest('hex');
      this.subs.push(
        await consumeEvents(
          nc,
          s.contract,
          s.durable,
          async (p) => {
            const ev = s.map(p as never);
            if (ev) await this.enqueue(ev, key(p));
          },
          this.opts.log,
        ),
      );
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.subs.splice(0).map((s) => s.stop()));
  }

  /** One pending delivery per endpoint of the user subscribed to the event's type. */
  async enqueue(ev: WebhookEvent, eventKey: string): Promise<number> {
    const endpoints = await this.db
      .selectFrom('webhook_endpoints')
      .select(['id', 'created_at'])
      .where('user_id', '=', ev.user_id)
      .where(sql<boolean>`${ev.type} = any(events)`)
      .execute();
    const at = Date.parse(ev.at);
    const due = endpoints.filter((e) => !(at < e.created_at.getTime()));
    if (due.length === 0) return 0;
    const payload = deliveryBody(ev);
    const tooLarge = Buffer.byteLength(payload) > this.opts.maxPayloadBytes;
    const now = new Date();
    await this.db
      .insertInto('webhook_deliveries')
      .values(
        due.map((e) => ({
          id: `msg_${createHash('sha256').update(eventKey).update(e.id).digest('hex').slice(0, 32)}`,
          webhook_id: e.id,
          event_type: ev.type,
          payload: tooLarge ? '{}' : payload,
          // A body over WEBHOOK_MAX_PAYLOAD_BYTES is never sent: the log says why.
          status: tooLarge ? 'failed' : 'pending',
          last_error: tooLarge ? `payload of ${Buffer.byteLength(payload)} bytes exceeds the limit of ${this.opts.maxPayloadBytes}` : null,
          next_attempt_at: tooLarge ? null : now,
          give_up_at: new Date(now.getTime() + this.opts.retryMs),
          last_status_code: null,
          delivered_at: null,
        })),
      )
      .onConflict((c) => c.column('id').doNothing())
      .execute();
    this.opts.wake();
    return due.length;
  }
}
