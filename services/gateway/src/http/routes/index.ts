import type { GatewayContext } from '../../context.ts';
import { openApiDocument } from '../openapi.ts';
import type { Route } from '../route.ts';
import { authRoutes } from './auth.ts';
import { backupRoutes } from './backups.ts';
import { deviceRoutes } from './devices.ts';
import { healthRoutes } from './health.ts';
import { instanceRoutes } from './instances.ts';
import { keyWatchRoutes } from './key-watch.ts';
import { keysRoutes } from './keys.ts';
import { logRoutes } from './logs.ts';
import { subscriptionRoutes } from './subscription.ts';
import { usageRoutes } from './usage.ts';
import { eventRoutes } from './events.ts';
import { waitRoutes } from './wait.ts';
import { webhookRoutes } from './webhooks.ts';

/** Every route of the API (paths below /api), in the order of the OpenAPI document. */
export function apiRoutes(ctx: GatewayContext): Route[] {
  const routes = [
    ...healthRoutes(ctx),
    ...authRoutes(ctx),
    ...instanceRoutes(ctx),
    ...logRoutes(ctx),
    ...waitRoutes(ctx),
    ...eventRoutes(ctx),
    ...backupRoutes(ctx),
    ...deviceRoutes(ctx),
    ...keysRoutes(ctx),
    ...keyWatchRoutes(ctx),
    ...subscriptionRoutes(ctx),
    ...usageRoutes(ctx),
    ...webhookRoutes(ctx),
  ];
  // Rendered once, from every route above.
  const document = openApiDocument(routes);
  return [...routes, { method: 'get', path: '/openapi.json', access: 'public', summary: 'This document', internal: true, handler: () => document }];
}
