import { z } from 'zod';
import { AppError, contracts, parseOr400 } from '@agenthost/shared';
import type { GatewayContext } from '../../context.ts';
import { StreamReader } from '../../domain/stream-reader.ts';
import { deliveryBody, webhookEventOf } from '../../domain/webhooks/fanout.ts';
import { TESTS_PER_MINUTE } from '../../domain/webhooks/test-event.ts';
import { UserWake } from '../../domain/webhooks/user-wake.ts';
import { jsonBody, type Route } from '../route.ts';
import { follow, frame, jsonFrame, liveStream, openStream, Waker, write } from '../sse.ts';
import { holdStream } from './streams.ts';

const W = contracts.webhooks;

const liveEvent = z
  .union([
    W.eventPayload.describe('event: its type (instance.status, keys.changed…), id: the stream sequence; the data is the exact body of a delivery of it'),
    W.liveReady.describe('event: ready, first on a new stream (no Last-Event-ID); its id is where a resume starts'),
  ])
  .describe("Server-sent events: the caller's events as webhooks deliver them; resume with Last-Event-ID; comment lines are heartbeats");

const webhookId = (params: Record<string, unknown>) => parseOr400(W.webhookId, params.webhookId);

/**
 * Outbound webhooks (Standard Webhooks). The gateway owns them: its schema keeps endpoints and deliveries, and its
 * replicas share the durable consumers of the events (domain/webhooks). Any signed-in user, subscription or not:
 * a lapsed subscription is itself an event worth receiving.
 */
export function webhookRoutes(ctx: GatewayContext): Route[] {
  // Read at each call: the route table is also built without a context (the OpenAPI document, the contract test).
  const hooks = () => ctx.webhooks.endpoints;
  const unavailable = ['WEBHOOKS_UNAVAILABLE'] as const;
  // Made at the first stream: the route table is also built without a bus.
  let live: { reader: StreamReader; wake: UserWake } | undefined;
  const bus = () => (live ??= { reader: new StreamReader(ctx.nc, ctx.config.NATS_REQUEST_TIMEOUT_MS), wake: new UserWake(ctx.nc, ctx.log) });
  return [
    {
      method: 'get',
      path: '/webhooks/events',
      access: 'user',
      operationId: 'streamWebhookEvents',
      summary: "Server-sent events: every event of the caller's, each as the body a webhook delivery of it carries (resume with Last-Event-ID)",
      response: liveEvent,
      responseType: 'text/event-stream',
      requestHeaders: { 'Last-Event-ID': 'Resume after this event id (the stream sequence of the last event received)' },
      errors: ['LAST_EVENT_ID_EXPIRED'],
      handler: (r) => streamUserEvents(ctx, bus(), r),
    },
    {
      method: 'post',
      path: '/webhooks',
      access: 'user',
      operationId: 'createWebhook',
      errors: ['WEBHOOK_URL_REFUSED', 'WEBHOOK_LIMIT_EXCEEDED', ...unavailable],
      summary: 'Register an https endpoint for events; the signing secret (whsec_…) is shown only in this answer',
      body: W.createBody,
      response: W.webhookCreated,
      handler: ({ req, caller }) => hooks().create(caller.user_id, parseOr400(W.createBody, jsonBody(req))),
    },
    {
      method: 'get',
      path: '/webhooks',
      access: 'user',
      operationId: 'listWebhooks',
      summary: "The caller's webhook endpoints (secrets are never shown again)",
      response: W.webhookList,
      handler: ({ caller }) => hooks().list(caller.user_id),
    },
    {
      method: 'delete',
      path: '/webhooks/:webhookId',
      access: 'user',
      operationId: 'deleteWebhook',
      errors: ['WEBHOOK_NOT_FOUND'],
      summary: 'Delete an endpoint and its delivery log; nothing more is sent to it',
      response: W.webhookDeleted,
      handler: ({ req, caller }) => hooks().remove(caller.user_id, webhookId(req.params)),
    },
    {
      method: 'post',
      path: '/webhooks/:webhookId/rotate',
      access: 'user',
      operationId: 'rotateWebhookSecret',
      errors: ['WEBHOOK_NOT_FOUND', ...unavailable],
      summary: 'A new signing secret, shown once; the old one keeps signing (a second v1 signature) until previous_secret_expires_at',
      response: W.webhookRotated,
      handler: ({ req, caller }) => hooks().rotate(caller.user_id, webhookId(req.params)),
    },
    {
      method: 'get',
      path: '/webhooks/:webhookId/deliveries',
      access: 'user',
      operationId: 'listWebhookDeliveries',
      errors: ['WEBHOOK_NOT_FOUND'],
      summary: "The endpoint's deliveries, newest first: attempts, last status, next attempt",
      query: W.deliveriesQuery,
      response: W.deliveryList,
      handler: ({ req, caller }) => hooks().deliveries(caller.user_id, webhookId(req.params), parseOr400(W.deliveriesQuery, req.query).limit),
    },
    {
      method: 'post',
      path: '/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
      access: 'user',
      operationId: 'redeliverWebhook',
      errors: ['WEBHOOK_NOT_FOUND', 'WEBHOOK_DELIVERY_NOT_FOUND'],
      summary: 'Send a delivery again now (same webhook-id), with a fresh retry window',
      response: W.deliveryView,
      handler: ({ req, caller }) => hooks().redeliver(caller.user_id, webhookId(req.params), parseOr400(W.deliveryId, req.params.deliveryId)),
    },
    {
      method: 'post',
      path: '/webhooks/:webhookId/test',
      access: 'user',
      operationId: 'testWebhook',
      errors: ['WEBHOOK_NOT_FOUND', ...unavailable],
      rateLimit: `${TESTS_PER_MINUTE} test events per user a minute`,
      summary: 'Send a signed webhook.test event to the endpoint now, through the real delivery path; answers the delivery (delivered, or failed with why)',
      response: W.deliveryView,
      handler: ({ req, caller }) => ctx.webhooks.test(caller.user_id, webhookId(req.params)),
    },
  ];
}

const LAST_EVENT_ID = /^\d{1,15}$/;
/** Every event the stream keeps: the reader skips those that are not a webhook event of the caller's. */
const ALL_EVENTS = 'events.>';

/**
 * GET /webhooks/events: the user-wide stream `agenthost webhooks listen` forwards (decision 0050). It reads the
 * event stream as GET /instance/events does (message-get from a cursor, one event in flight, the id its sequence)
 * and sends each event of the caller's that webhooks deliver, its data the very body a delivery carries.
 */
async function streamUserEvents(
  ctx: GatewayContext,
  bus: { reader: StreamReader; wake: UserWake },
  { req, res, caller, requestId }: Parameters<Route['handler']>[0],
): Promise<void> {
  const given = req.get('last-event-id');
  if (given !== undefined && !LAST_EVENT_ID.test(given.trim()))
    throw new AppError('VALIDATION_FAILED', 'Last-Event-ID must be an event id of this stream (a number)');
  const resumeFrom = given === undefined ? undefined : Number(given.trim());
  // A slot under the user's cap; its "instance" is the user's name for it, so at most STREAMS_PER_INSTANCE of them.
  const stream = await holdStream(ctx, { kind: 'events', instance_id: `user:${caller.user_id}`, user_id: caller.user_id });
  const waker = new Waker();
  const unwatch = bus.wake.watch(caller.user_id, waker.signal);
  try {
    const bounds = await bus.reader.bounds();
    if (resumeFrom !== undefined && resumeFrom < bounds.first - 1) throw new AppError('LAST_EVENT_ID_EXPIRED');
    const cursor = resumeFrom ?? bounds.last;
    openStream(res);
    const live = liveStream(res, waker, (end) => ctx.instanceEvents.hold(end), ctx.config.SSE_HEARTBEAT_SECONDS);
    stream.expire(live.end);
    try {
      if (resumeFrom === undefined) await write(res, frame(cursor, 'ready', { at: new Date().toISOString() }));
      for await (const ev of follow((from) => bus.reader.next(from, ALL_EVENTS), waker, cursor, live.isOpen)) {
        const hook = webhookEventOf(ev.subject, ev.data);
        if (!hook || hook.user_id !== caller.user_id) continue;
        if (!(await write(res, jsonFrame(ev.seq, hook.type, deliveryBody(hook))))) break;
      }
    } catch (err) {
      // Headers are gone: the client sees the stream end and resumes from its last id.
      ctx.log.warn({ err, request_id: requestId }, 'webhook event stream ended by an error');
    } finally {
      live.close();
    }
  } finally {
    unwatch();
    stream.release();
  }
}
