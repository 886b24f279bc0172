import type { GatewayContext } from '../context.ts';
import { Router } from '../http/router.ts';
import { authRoutes } from './auth.ts';
import { healthRoutes } from './health.ts';
import { instanceRoutes } from './instances.ts';
import { keyWatchRoutes } from './key-watch.ts';
import { keysRoutes } from './keys.ts';
import { subscriptionRoutes } from './subscription.ts';
import { usageRoutes } from './usage.ts';

/** Every route of the API (paths below /api). */
export function apiRoutes(ctx: GatewayContext): Router {
  const r = new Router();
  healthRoutes(ctx, r);
  authRoutes(ctx, r);
  instanceRoutes(ctx, r);
  keysRoutes(ctx, r);
  keyWatchRoutes(ctx, r);
  subscriptionRoutes(ctx, r);
  usageRoutes(ctx, r);
  // Rendered once, after every route above has described itself.
  const document = ctx.catalog.document();
  r.add('get', '/openapi.json', () => document);
  return r;
}
