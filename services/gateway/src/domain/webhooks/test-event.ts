import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { AppError, type contracts } from '@agenthost/shared';
import type { GatewayDB } from '../../db/schema.ts';
import { deliveryView } from './endpoints.ts';
import { deliveryBody } from './fanout.ts';
import type { DeliveryWorker } from './worker.ts';

/**
 * Test events a user may send a minute, across their endpoints and the gateway's replicas (counted in the delivery
 * log): each is an outbound request to a URL of the user's choosing, so it is limited as a sign-in is.
 */
export const TESTS_PER_MINUTE = 10;

/**
 * Sends a `webhook.test` event to one of the user's endpoints through the real delivery path (a delivery row,
 * the worker's attempt: the same address check, signing and log) and answers with its outcome. The row is made
 * already claimed, so no other replica sends it; its retry window is already over, so a failure is final (the user
 * sends another test) and the 24 h of retries are left to real events.
 */
export async function sendTestEvent(
  db: Kysely<GatewayDB>,
  worker: DeliveryWorker,
  userId: string,
  webhookId: string,
): Promise<contracts.webhooks.DeliveryView> {
  const now = new Date();
  const id = `msg_${randomBytes(16).toString('hex')}`;
  const row = await db.transaction().execute(async (trx) => {
    // The same per-user lock as endpoint creation: concurrent tests cannot pass the limit together.
    await sql`select pg_advisory_xact_lock(hashtext(${`webhooks:${userId}`}))`.execute(trx);
    const endpoint = await trx.selectFrom('webhook_endpoints').select('id').where('id', '=', webhookId).where('user_id', '=', userId).executeTakeFirst();
    if (!endpoint) throw new AppError('WEBHOOK_NOT_FOUND');
    const { n } = await trx
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_endpoints as e', 'e.id', 'd.webhook_id')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('e.user_id', '=', userId)
      .where('d.event_type', '=', 'webhook.test')
      .where('d.created_at', '>', sql<Date>`now() - interval '1 minute'`)
      .executeTakeFirstOrThrow();
    if (Number(n) >= TESTS_PER_MINUTE) throw new AppError('RATE_LIMITED', `At most ${TESTS_PER_MINUTE} test events a minute`, { retryAfter: 60 });
    const data = { webhook_id: webhookId, message: 'A test event, sent on request: nothing happened' };
    return trx
      .insertInto('webhook_deliveries')
      .values({
        id,
        webhook_id: webhookId,
        event_type: 'webhook.test',
        payload: deliveryBody({ type: 'webhook.test', at: now.toISOString(), data }),
        status: 'pending',
        attempts: 1,
        next_attempt_at: new Date(now.getTime() + worker.leaseSeconds * 1000),
        give_up_at: now,
        last_status_code: null,
        last_error: null,
        delivered_at: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  await worker.deliver(row);
  return deliveryView(await db.selectFrom('webhook_deliveries').selectAll().where('id', '=', row.id).executeTakeFirstOrThrow());
}
