import type { ServerResponse } from 'node:http';
import { AppError, remaining } from '@agenthost/shared';
import type { GatewayContext } from '../context.ts';
import { isEntitled, type Subscription } from '../entitlement.ts';
import type { RouteDoc } from '../openapi.ts';
import type { ApiRequest, Method, Router } from './router.ts';

/**
 * public: no credentials. token: a valid access token only (no subscription lookup). user: a valid access token (subscription optional, counted when present).
 * subscriber: a valid token and an active subscription (402 otherwise), counted against the tier.
 * instance: the route authenticates an instance itself (X-Instance-ID / X-Instance-Secret); not counted.
 */
export type Access = 'public' | 'token' | 'user' | 'subscriber' | 'instance';

export interface Caller {
  user_id: string;
  wallet_address: string;
  subscription: Subscription | null;
}

export interface RouteCtx {
  req: ApiRequest;
  res: ServerResponse;
  requestId: string;
  /** Present for user and subscriber routes. */
  caller: Caller;
  /** Audit metadata for backends. */
  meta: { ip: string; user_agent: string; request_id: string };
}

export type Handler = (r: RouteCtx) => Promise<unknown>;

export interface RouteOptions {
  /** Count the request against the tier's limits (default true). POST /subscription/register opts out, so a user at the limit can still upgrade. */
  count?: boolean;
}

/**
 * Register a route (and describe it in the OpenAPI document): checks run in the order of spec §5 (token, then subscription, then usage), the
 * subscription headers are set before the handler runs (so errors carry them too), and the handler's
 * return value is sent as JSON (status from res.statusCode, default 200).
 */
export function route(router: Router, ctx: GatewayContext, method: Method, path: string, access: Access, doc: RouteDoc, handler: Handler, opts: RouteOptions = {}): void {
  ctx.catalog.add({ method, path, access, ...doc });
  router.add(method, path, async (req, res) => {
    const requestId = req.requestId;
    const meta = { ip: req.ip ?? '', user_agent: (req.get('user-agent') ?? '').slice(0, 500), request_id: requestId };
    let caller = NO_CALLER;
    let counted: Promise<void> | undefined;
    if (access === 'token') {
      const claims = await ctx.tokens.verify(req.get('authorization'));
      req.userId = claims.user_id;
      caller = { user_id: claims.user_id, wallet_address: claims.wallet_address, subscription: null };
    }
    if (access === 'user' || access === 'subscriber') {
      const claims = await ctx.tokens.verify(req.get('authorization'));
      req.userId = claims.user_id;
      const subscription = await ctx.entitlements.lookup(claims, requestId);
      caller = { user_id: claims.user_id, wallet_address: claims.wallet_address, subscription };
      const entitled = isEntitled(subscription);
      setSubscriptionHeaders(res, entitled ? subscription : null, undefined);
      if (access === 'subscriber' && !entitled) throw new AppError('SUBSCRIPTION_REQUIRED');
      if (entitled && opts.count !== false) {
        try {
          const decision = await ctx.usage.count(claims.user_id, subscription);
          counted = decision.counted;
          setSubscriptionHeaders(res, subscription, decision.remainingToday);
        } catch (err) {
          const left = err instanceof AppError ? err.details?.remainingToday : undefined;
          if (typeof left === 'number') setSubscriptionHeaders(res, subscription, left);
          throw err;
        }
      } else {
        // Not counted against a tier: the small allowance applies (quota/allowance.ts).
        ctx.allowance.take(claims.user_id);
        if (entitled) await headersFor(ctx, res, claims.user_id, subscription);
      }
    }
    if (!counted) return handler({ req, res, requestId, caller, meta });
    // The request is forwarded while its count is written; the answer (or error) leaves only once both are done,
    // so a replica killed at any moment has counted every request it answered (usage.ts).
    try {
      return await handler({ req, res, requestId, caller, meta });
    } finally {
      await counted;
    }
  });
}

const NO_CALLER: Caller = { user_id: '', wallet_address: '', subscription: null };

/**
 * The JSON answer, without ETag/freshness work: API answers are per caller and carry changing usage
 * headers, so a 304 would never be right, and hashing every body costs time.
 */
export function sendJson(res: ServerResponse, body: unknown): void {
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(body));
}

/** X-Subscription-Tier / -Expires / X-Usage-Remaining on every response; "none" when the caller has no subscription. */
export function setSubscriptionHeaders(res: ServerResponse, sub: Subscription | null, remainingToday: number | undefined): void {
  res.setHeader('X-Subscription-Tier', sub ? sub.tier : 'none');
  res.setHeader('X-Subscription-Expires', sub ? sub.expires_at : 'none');
  res.setHeader('X-Usage-Remaining', String(remainingToday ?? 0));
}

/** The headers for a caller whose request was not counted: remaining = the tier's daily limit minus today's count. */
export async function headersFor(ctx: GatewayContext, res: ServerResponse, userId: string, sub: Subscription | null): Promise<void> {
  if (!isEntitled(sub)) return setSubscriptionHeaders(res, null, undefined);
  setSubscriptionHeaders(res, sub, remaining(ctx.config.TIER_LIMITS_JSON[sub.tier].requests_per_day, await ctx.usage.requestsToday(userId)));
}

/** The JSON body as an object: anything else becomes {} and then fails validation field by field. */
export const jsonBody = (req: ApiRequest): Record<string, unknown> =>
  req.body && typeof req.body === 'object' && !Array.isArray(req.body) ? (req.body as Record<string, unknown>) : {};
