import { Router } from 'express';
import type { GatewayContext } from '../context.ts';
import { authRoutes } from './auth.ts';
import { healthRoutes } from './health.ts';
import { instanceRoutes } from './instances.ts';
import { keysRoutes } from './keys.ts';
import { subscriptionRoutes } from './subscription.ts';
import { usageRoutes } from './usage.ts';

/** Every route file of the API, mounted under /api. */
export function apiRoutes(ctx: GatewayContext): Router {
  const r = Router();
  r.use(healthRoutes(ctx));
  r.use(authRoutes(ctx));
  r.use(instanceRoutes(ctx));
  r.use(keysRoutes(ctx));
  r.use(subscriptionRoutes(ctx));
  r.use(usageRoutes(ctx));
  // Rendered once, after every route above has described itself.
  const document = ctx.catalog.document();
  r.get('/openapi.json', (_req, res) => {
    res.json(document);
  });
  return r;
}
