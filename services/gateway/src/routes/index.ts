import { Router } from 'express';
import type { GatewayContext } from '../context.ts';
import { authRoutes } from './auth.ts';
import { healthRoutes } from './health.ts';

/** Every route file of the API, mounted under /api. */
export function apiRoutes(ctx: GatewayContext): Router {
  const r = Router();
  r.use(healthRoutes(ctx));
  r.use(authRoutes(ctx));
  return r;
}
