import { contracts, parseOr400 } from '@agenthost/shared';
import type { GatewayContext } from '../../context.ts';
import { jsonBody, type Route } from '../route.ts';

const W = contracts.webhooks;

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
  return [
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
  ];
}
