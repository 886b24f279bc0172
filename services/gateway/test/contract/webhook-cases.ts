import { setTimeout as sleep } from 'node:timers/promises';
import type { Actors, Case, State } from './types.ts';

const MISSING_HOOK = 'wh_0123456789abcdef0123';
const MISSING_DELIVERY = 'msg_0123456789abcdef0123';

/**
 * Webhook endpoints, in two parts around an instance's life: the endpoint is made, listed and rotated first, so the
 * subscriber's instance events fan out to it; after them its delivery log holds a delivery (to a receiver that is not
 * there), which is redelivered, and only then is the endpoint deleted.
 */
export async function webhookCases(a: Actors): Promise<{ before: Case[]; after: Case[] }> {
  const hook = (await a.subscriber.api.post('/webhooks', { url: 'https://localhost/contract', events: ['instance.status'] })).body as { id: string };
  const deliveries = `/webhooks/${hook.id}/deliveries`;
  const before: Case[] = [
    {
      operationId: 'createWebhook',
      why: 'an allowed https host',
      as: 'user',
      path: '/webhooks',
      body: { url: 'https://localhost/hooks', events: ['instance.status', 'keys.changed'] },
      status: 200,
      documented: true,
    },
    {
      operationId: 'createWebhook',
      why: 'a loopback address',
      as: 'user',
      path: '/webhooks',
      body: { url: 'https://127.0.0.1/hooks', events: ['instance.status'] },
      status: 400,
      documented: true,
    },
    {
      operationId: 'createWebhook',
      why: 'an unknown event type',
      as: 'user',
      path: '/webhooks',
      body: { url: 'https://localhost/hooks', events: ['instance.nope'] },
      status: 400,
    },
    { operationId: 'listWebhooks', why: 'the endpoints', as: 'subscriber', path: '/webhooks', status: 200, documented: true },
    { operationId: 'rotateWebhookSecret', why: 'a new secret', as: 'subscriber', path: `/webhooks/${hook.id}/rotate`, status: 200, documented: true },
    { operationId: 'listWebhookDeliveries', why: "another user's endpoint", as: 'user', path: deliveries, status: 404, documented: true },
    {
      operationId: 'redeliverWebhook',
      why: 'an unknown delivery',
      as: 'subscriber',
      path: `${deliveries}/${MISSING_DELIVERY}/redeliver`,
      status: 404,
      documented: true,
    },
  ];
  const after: Case[] = [
    {
      operationId: 'listWebhookDeliveries',
      why: "the instance's events",
      as: 'subscriber',
      path: `${deliveries}?limit=10`,
      status: 200,
      documented: true,
      // Fan-out runs from a JetStream consumer: the deliveries of the instance's events land shortly after them.
      keep: async (_body, s: State) => {
        for (let i = 0; i < 300 && !s.delivery; i++) {
          const list = (await a.subscriber.api.get(`${deliveries}?limit=10`)).body as { deliveries?: Array<{ id: string }> };
          s.delivery = list.deliveries?.[0]?.id ?? '';
          if (!s.delivery) await sleep(100);
        }
      },
    },
    {
      operationId: 'redeliverWebhook',
      why: 'a delivery',
      as: 'subscriber',
      path: (s) => `${deliveries}/${s.delivery}/redeliver`,
      status: 200,
      documented: true,
    },
    // The receiver is not there: the answer is the test delivery, failed, with why.
    { operationId: 'testWebhook', why: 'a test event', as: 'subscriber', path: `/webhooks/${hook.id}/test`, status: 200, documented: true },
    { operationId: 'streamWebhookEvents', why: 'a new stream: ready', as: 'subscriber', path: '/webhooks/events', status: 200, documented: true },
    {
      operationId: 'streamWebhookEvents',
      why: "the subscriber's events from the stream's start",
      as: 'subscriber',
      path: '/webhooks/events',
      headers: { 'Last-Event-ID': '0' },
      status: 200,
      documented: true,
    },
    { operationId: 'deleteWebhook', why: 'the endpoint', as: 'subscriber', path: `/webhooks/${hook.id}`, status: 200, documented: true },
    { operationId: 'deleteWebhook', why: 'gone', as: 'subscriber', path: `/webhooks/${MISSING_HOOK}`, status: 404, documented: true },
  ];
  return { before, after };
}
