import express, { type Request, type Response } from 'express';
import { AppError } from '@agenthost/shared';
import type { GatewayContext } from '../context.ts';
import { isEntitled } from '../domain/entitlement.ts';
import { jsonBodies } from './body.ts';
import { headersFor, setSubscriptionHeaders } from './headers.ts';
import { idempotent } from './idempotency.ts';
import { sendJson, type Caller, type Route } from './route.ts';

/**
 * The Express router of the API: each route once, behind the JSON body parser (so an unknown path is a 404
 * whatever its body), and OPTIONS for every path, answered with the methods it allows.
 */
export function mountRoutes(ctx: GatewayContext, routes: Route[]): express.Router {
  const router = express.Router();
  const body = jsonBodies(ctx.config.BODY_LIMIT_BYTES);
  const allowed = new Map<string, string[]>();
  for (const route of routes) {
    // The route's pattern (never its parameters' values) labels the request's metrics and span.
    const pattern = route.path;
    const named = (_req: Request, res: Response, next: () => void) => {
      res.locals.route = pattern;
      next();
    };
    router[route.method](route.path, named, body, serve(ctx, route));
    const methods = allowed.get(route.path) ?? [];
    allowed.set(route.path, [...methods, route.method.toUpperCase(), ...(route.method === 'get' ? ['HEAD'] : [])]);
  }
  for (const [path, methods] of allowed) router.options(path, (_req, res) => void res.status(204).setHeader('Allow', methods.join(', ')).end());
  return router;
}

/** The route's Express handler: access checks, then the handler; Express 5 passes what it throws to the error handler. */
function serve(ctx: GatewayContext, route: Route) {
  return async (req: Request, res: Response): Promise<void> => {
    const requestId = res.locals.requestId as string;
    const { caller, counted } = await admit(ctx, route, req, res);
    const key = req.get('idempotency-key');
    // The audit metadata only the key routes send: req.ip walks the proxy chain, so it is read when asked for.
    let meta: { ip: string; user_agent: string; request_id: string } | undefined;
    const routeCtx = {
      req,
      res,
      requestId,
      caller,
      get meta() {
        return (meta ??= { ip: req.ip ?? '', user_agent: (req.get('user-agent') ?? '').slice(0, 500), request_id: requestId });
      },
    };
    const handle = async () => route.handler(routeCtx);
    // Keys are kept per user: the public POSTs (sign-in, a bootstrap's report) have none and ignore the header.
    const run =
      key !== undefined && caller.user_id && (route.method === 'post' || route.method === 'delete')
        ? () => idempotent(ctx, req, res, caller.user_id, key, handle)
        : handle;
    let body: unknown;
    if (!counted) body = await answer(ctx, route, req, res, caller, run);
    else {
      // The request is forwarded while its count is written; the answer (or error) leaves only once both are done,
      // so a replica killed at any moment has counted every request it answered (domain/quota/store.ts).
      try {
        body = await answer(ctx, route, req, res, caller, run);
      } finally {
        await counted;
      }
    }
    if (!res.headersSent) sendJson(res, body ?? {});
  };
}

/**
 * The handler's answer. A `lastKnown` read keeps it, and answers the last one kept (with `Age`) when its backend is
 * unavailable; any other successful request of the user's drops what is kept of theirs.
 */
async function answer(ctx: GatewayContext, route: Route, req: Request, res: Response, caller: Caller, run: () => Promise<unknown>): Promise<unknown> {
  const user = caller.user_id;
  if (!user) return run();
  if (!route.lastKnown) {
    const body = await run();
    if (route.method !== 'get') ctx.lastAnswers.forget(user);
    return body;
  }
  try {
    const body = await run();
    ctx.lastAnswers.keep(user, req.originalUrl, body);
    return body;
  } catch (err) {
    const kept = err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE' ? ctx.lastAnswers.last(user, req.originalUrl) : undefined;
    if (!kept) throw err;
    res.setHeader('Age', String(kept.ageSeconds));
    return kept.body;
  }
}

const NO_CALLER: Caller = { user_id: '', wallet_address: '', subscription: null };

/**
 * Checks in the order of spec §5: token, then subscription, then usage. The subscription headers are set before the
 * handler runs, so errors carry them too.
 */
async function admit(ctx: GatewayContext, route: Route, req: Request, res: Response): Promise<{ caller: Caller; counted?: Promise<void> }> {
  if (route.access === 'public' || route.access === 'instance') return { caller: NO_CALLER };
  const claims = await ctx.tokens.verify(req.get('authorization'));
  res.locals.userId = claims.user_id;
  if (route.access === 'token') return { caller: { user_id: claims.user_id, wallet_address: claims.wallet_address, subscription: null } };
  const subscription = await ctx.entitlements.lookup(claims, res.locals.requestId as string);
  const caller = { user_id: claims.user_id, wallet_address: claims.wallet_address, subscription };
  const entitled = isEntitled(subscription);
  setSubscriptionHeaders(res, entitled ? subscription : null, undefined);
  if (route.access === 'subscriber' && !entitled) throw new AppError('SUBSCRIPTION_REQUIRED');
  if (!entitled || route.count === false) {
    // Not counted against a tier: the small allowance applies (domain/quota/allowance.ts).
    ctx.allowance.take(claims.user_id);
    if (entitled) await headersFor(ctx, res, claims.user_id, subscription);
    return { caller };
  }
  try {
    const decision = await ctx.usage.count(claims.user_id, subscription);
    setSubscriptionHeaders(res, subscription, decision.remainingToday);
    return { caller, counted: decision.counted };
  } catch (err) {
    const left = err instanceof AppError ? err.details?.remainingToday : undefined;
    if (typeof left === 'number') setSubscriptionHeaders(res, subscription, left);
    throw err;
  }
}
