import { randomBytes } from 'node:crypto';
import { sql, type Kysely, type Selectable } from 'kysely';
import { AppError, contracts, newWebhookSecret } from '@agenthost/shared';
import type { GatewayDB } from '../../db/schema.ts';
import { sealSecret } from './secrets.ts';
import { resolveTarget, type Lookup } from './target.ts';

const W = contracts.webhooks;
type EndpointRow = Selectable<GatewayDB['webhook_endpoints']>;
type DeliveryRow = Selectable<GatewayDB['webhook_deliveries']>;

export interface WebhookSettings {
  perUser: number;
  allowHosts: readonly string[];
  overlapMs: number;
  retryMs: number;
  /** Undefined when no key is configured: every route answers WEBHOOKS_UNAVAILABLE. */
  key: Buffer | undefined;
  lookup?: Lookup;
  /** Wakes the delivery worker (a redelivery is due now). */
  wake: () => void;
}

const newId = () => `wh_${randomBytes(12).toString('hex')}`;

/** A user's webhook endpoints: create (secret shown once), list, delete, rotate, and their delivery log. */
export class WebhookEndpoints {
  private readonly db: Kysely<GatewayDB>;
  private readonly settings: WebhookSettings;

  constructor(db: Kysely<GatewayDB>, settings: WebhookSettings) {
    this.db = db;
    this.settings = settings;
  }

  private key(): Buffer {
    if (!this.settings.key) throw new AppError('WEBHOOKS_UNAVAILABLE');
    return this.settings.key;
  }

  async create(userId: string, input: { url: string; events: contracts.webhooks.EventType[]; description?: string | undefined }) {
    const key = this.key();
    await resolveTarget(input.url, this.settings.allowHosts, this.settings.lookup);
    const id = newId();
    const secret = newWebhookSecret();
    const events = [...new Set(input.events)];
    // Counted and inserted in one transaction, under a per-user lock, so concurrent creates cannot pass the limit.
    const row = await this.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtext(${`webhooks:${userId}`}))`.execute(trx);
      const { n } = await trx
        .selectFrom('webhook_endpoints')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('user_id', '=', userId)
        .executeTakeFirstOrThrow();
      if (Number(n) >= this.settings.perUser) throw new AppError('WEBHOOK_LIMIT_EXCEEDED', `At most ${this.settings.perUser} webhook endpoints per user`);
      return trx
        .insertInto('webhook_endpoints')
        .values({
          id,
          user_id: userId,
          url: input.url,
          events,
          description: input.description ?? null,
          secret_sealed: sealSecret(key, secret, id),
          previous_secret_sealed: null,
          previous_expires_at: null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    return { ...view(row), secret };
  }

  async list(userId: string) {
    const rows = await this.db.selectFrom('webhook_endpoints').selectAll().where('user_id', '=', userId).orderBy('created_at').execute();
    return { webhooks: rows.map(view) };
  }

  async remove(userId: string, id: string) {
    const r = await this.db.deleteFrom('webhook_endpoints').where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
    if (Number(r.numDeletedRows) === 0) throw new AppError('WEBHOOK_NOT_FOUND');
    return { success: true, id };
  }

  /** A new secret, shown once; the current one keeps signing (a second signature) for WEBHOOK_SECRET_OVERLAP_HOURS. */
  async rotate(userId: string, id: string) {
    const key = this.key();
    const secret = newWebhookSecret();
    const until = new Date(Date.now() + this.settings.overlapMs);
    const row = await this.db
      .updateTable('webhook_endpoints')
      .set((eb) => ({ previous_secret_sealed: eb.ref('secret_sealed'), previous_expires_at: until, secret_sealed: sealSecret(key, secret, id) }))
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .returning('id')
      .executeTakeFirst();
    if (!row) throw new AppError('WEBHOOK_NOT_FOUND');
    return { id, secret, previous_secret_expires_at: until.toISOString() };
  }

  private async owned(userId: string, id: string): Promise<void> {
    const row = await this.db.selectFrom('webhook_endpoints').select('id').where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
    if (!row) throw new AppError('WEBHOOK_NOT_FOUND');
  }

  async deliveries(userId: string, id: string, limit = 50) {
    await this.owned(userId, id);
    const rows = await this.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('webhook_id', '=', id)
      .orderBy('created_at', 'desc')
      .orderBy('id')
      .limit(limit)
      .execute();
    return { deliveries: rows.map(deliveryView) };
  }

  /** Sends a delivery again now (delivered or failed alike), with a fresh retry window; its webhook-id stays. */
  async redeliver(userId: string, id: string, deliveryId: string) {
    await this.owned(userId, id);
    const row = await this.db
      .updateTable('webhook_deliveries')
      .set({ status: 'pending', next_attempt_at: new Date(), give_up_at: new Date(Date.now() + this.settings.retryMs), last_error: null })
      .where('id', '=', deliveryId)
      .where('webhook_id', '=', id)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw new AppError('WEBHOOK_DELIVERY_NOT_FOUND');
    this.settings.wake();
    return deliveryView(row);
  }
}

function view(row: EndpointRow): contracts.webhooks.WebhookView {
  const overlapping = row.previous_expires_at && row.previous_expires_at.getTime() > Date.now();
  return {
    id: row.id,
    url: row.url,
    events: row.events as contracts.webhooks.EventType[],
    ...(row.description ? { description: row.description } : {}),
    created_at: row.created_at.toISOString(),
    ...(overlapping ? { previous_secret_expires_at: row.previous_expires_at!.toISOString() } : {}),
  };
}

export function deliveryView(row: DeliveryRow): contracts.webhooks.DeliveryView {
  return W.deliveryView.parse({
    id: row.id,
    webhook_id: row.webhook_id,
    event_type: row.event_type,
    status: row.status,
    attempts: row.attempts,
    ...(row.last_status_code !== null ? { last_status_code: row.last_status_code } : {}),
    ...(row.last_error ? { last_error: row.last_error } : {}),
    ...(row.status === 'pending' && row.next_attempt_at ? { next_attempt_at: row.next_attempt_at.toISOString() } : {}),
    created_at: row.created_at.toISOString(),
    ...(row.delivered_at ? { delivered_at: row.delivered_at.toISOString() } : {}),
  });
}
