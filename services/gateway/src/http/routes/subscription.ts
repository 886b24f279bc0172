import { AppError, contracts } from '@agenthost/shared';
import type { GatewayContext } from '../../context.ts';
import { coalesce } from '../../domain/call.ts';
import type { Subscription } from '../../domain/entitlement.ts';
import { headersFor } from '../headers.ts';
import { jsonBody, type Caller, type Route } from '../route.ts';

/** GET /subscription/status, POST /subscription/register, POST /subscription/refresh (spec §4.3–4.5). */
export function subscriptionRoutes(ctx: GatewayContext): Route[] {
  const batched = coalesce(ctx.call);
  const status: Route = {
    method: 'get',
    path: '/subscription/status',
    access: 'user',
    operationId: 'getSubscription',
    errors: ['SUBSCRIPTION_NOT_FOUND'],
    summary: 'The subscription with instance, request and storage usage (404 when none)',
    response: contracts.api.statusView,
    lastKnown: true,
    handler: async ({ res, caller, requestId }) => {
      const sub = await batched(contracts.billing.status, who(caller), requestId);
      // billing-chain's answer is at least as fresh as the gateway's copy: keep it, and let the headers agree with the body.
      if (!sameView(sub, caller.subscription)) {
        ctx.entitlements.set(caller.wallet_address, sub);
        await headersFor(ctx, res, caller.user_id, sub);
      }
      return statusView(ctx, caller.user_id, sub, requestId);
    },
  };
  const register: Route = {
    method: 'post',
    path: '/subscription/register',
    access: 'user',
    operationId: 'registerSubscription',
    errors: [
      'TX_SIGNATURE_MALFORMED',
      'INVALID_TIER',
      'TRANSACTION_NOT_FOUND',
      'TX_FAILED',
      'TX_WRONG_PROGRAM',
      'TX_NOT_SUBSCRIBE',
      'TX_WRONG_SIGNER',
      'TX_TIER_MISMATCH',
      'TX_ALREADY_USED',
      'SUBSCRIPTION_ACCOUNT_INVALID',
    ],
    summary: 'Register a confirmed subscribe transaction',
    body: contracts.billing.registerBody,
    response: contracts.billing.register.output,
    count: false,
    handler: async ({ req, res, caller, requestId }) => {
      const body = jsonBody(req);
      if (typeof body.tx_signature !== 'string')
        throw new AppError('VALIDATION_FAILED', 'tx_signature: required, a base58 transaction signature', { details: { field: 'tx_signature' } });
      if (body.tier === undefined)
        throw new AppError('VALIDATION_FAILED', 'tier: required, 0 (free), 1 (pro) or 2 (enterprise)', { details: { field: 'tier' } });
      if (body.tier !== 0 && body.tier !== 1 && body.tier !== 2) throw new AppError('INVALID_TIER');
      if (body.tx_signature.length > 200) throw new AppError('TX_SIGNATURE_MALFORMED');
      const out = await ctx.call(contracts.billing.register, { ...who(caller), tx_signature: body.tx_signature, tier: body.tier }, requestId);
      // The answer is the fresh view: cache it now (another billing replica may still hold the old one for a moment).
      const sub: Subscription = { wallet_address: caller.wallet_address, ...out.subscription, refreshed_at: new Date().toISOString() };
      ctx.entitlements.set(caller.wallet_address, sub);
      await headersFor(ctx, res, caller.user_id, sub);
      return out;
    },
  };
  const refresh: Route = {
    method: 'post',
    path: '/subscription/refresh',
    access: 'user',
    operationId: 'refreshSubscription',
    errors: ['SUBSCRIPTION_NOT_FOUND'],
    summary: 'Re-read the subscription from the chain now',
    response: contracts.api.statusView,
    handler: async ({ res, caller, requestId }) => {
      const sub = await ctx.call(contracts.billing.refresh, who(caller), requestId);
      ctx.entitlements.set(caller.wallet_address, sub);
      await headersFor(ctx, res, caller.user_id, sub);
      return statusView(ctx, caller.user_id, sub, requestId);
    },
  };
  return [status, register, refresh];
}

const who = (c: Caller) => ({ user_id: c.user_id, wallet_address: c.wallet_address });

const sameView = (a: Subscription, b: Subscription | null) =>
  !!b && a.tier === b.tier && a.is_active === b.is_active && a.expires_at === b.expires_at && a.cancelled === b.cancelled;

/**
 * The status view of spec §2.1: billing-chain's cached subscription, instances and storage from the
 * provisioner, requests counted today by the gateway, limits from the tier table (-1 = unlimited).
 */
async function statusView(ctx: GatewayContext, userId: string, sub: Subscription, requestId?: string) {
  const limits = ctx.config.TIER_LIMITS_JSON[sub.tier];
  const [prov, requestsToday] = await Promise.all([ctx.provisionerUsage.get(userId, requestId), ctx.usage.requestsToday(userId)]);
  return {
    wallet_address: sub.wallet_address,
    tier: sub.tier,
    is_active: sub.is_active,
    expires_at: sub.expires_at,
    cancelled: sub.cancelled,
    instances_used: prov.instances_active,
    instances_limit: limits.instances,
    requests_today: requestsToday,
    requests_limit: limits.requests_per_day,
    storage_used_mb: prov.storage_used_mb,
    storage_limit_mb: limits.storage_mb,
  };
}
