import { Router } from 'express';
import { contracts } from '@agenthost/shared';
import type { GatewayContext } from '../context.ts';
import { route } from '../http/route.ts';

export function authRoutes(ctx: GatewayContext): Router {
  const r = Router();
  route(r, ctx, 'get', '/auth/nonce', 'public', async ({ req, requestId }) =>
    ctx.call(contracts.auth.nonceCreate, { wallet_address: String(req.query.wallet_address ?? '') }, requestId),
  );
  route(r, ctx, 'post', '/auth/login', 'public', async ({ req, requestId }) => ctx.call(contracts.auth.login, req.body ?? {}, requestId));
  route(r, ctx, 'get', '/auth/me', 'token', async ({ caller }) => ({ user_id: caller.user_id, wallet_address: caller.wallet_address }));
  return r;
}
