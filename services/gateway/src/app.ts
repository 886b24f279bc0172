import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError, context, createAccessLog, toAppError, type Logger } from '@agenthost/shared';
import type { GatewayContext } from './context.ts';
import { hasBody, readJson } from './http/body.ts';
import { observeRequest, startHttpSpan } from './http/observe.ts';
import { sendJson, setSubscriptionHeaders } from './http/route.ts';
import { ApiRequest, trustedProxies, type Router } from './http/router.ts';
import { apiRoutes } from './routes/index.ts';

const PREFIX = '/api';
const SAFE_ID = /^[A-Za-z0-9._-]{8,100}$/;

/**
 * The gateway's HTTP handler: request id → default subscription headers → route → JSON body → handler →
 * JSON answer, or the error body of spec §7; one access-log line per request (never headers or bodies).
 */
export function buildApp(ctx: GatewayContext): (req: IncomingMessage, res: ServerResponse) => void {
  const router = apiRoutes(ctx);
  const access = createAccessLog('gateway', ctx.config.LOG_LEVEL);
  const proxies = ctx.config.TRUSTED_PROXIES.length ? trustedProxies(ctx.config.TRUSTED_PROXIES) : undefined;
  return (raw, res) => {
    const started = performance.now();
    const given = raw.headers['x-request-id'];
    const requestId = typeof given === 'string' && SAFE_ID.test(given) ? given : randomUUID();
    res.setHeader('X-Request-ID', requestId);
    setSubscriptionHeaders(res, null, undefined);
    const url = raw.url ?? '/';
    const q = url.indexOf('?');
    const fullPath = q < 0 ? url : url.slice(0, q);
    const inApi = fullPath.length >= PREFIX.length && fullPath.slice(0, PREFIX.length).toLowerCase() === PREFIX && (fullPath.length === PREFIX.length || fullPath[PREFIX.length] === '/');
    const req = new ApiRequest(raw, inApi ? fullPath.slice(PREFIX.length) || '/' : fullPath, q < 0 ? '' : url.slice(q + 1), requestId, proxies);
    const traced = startHttpSpan(req.method, requestId);
    void (traced ? context.with(traced.ctx, () => handle(ctx, router, req, res, inApi)) : handle(ctx, router, req, res, inApi)).then(() => {
      const ms = performance.now() - started;
      const traceId = observeRequest(traced?.span, req.route, req.method, res.statusCode, ms / 1000);
      access({ request_id: requestId, method: req.method, path: fullPath, status: res.statusCode, ms: Math.round(ms * 10) / 10, user_id: req.userId, trace_id: traceId });
    });
  };
}

async function handle(ctx: GatewayContext, router: Router, req: ApiRequest, res: ServerResponse, inApi: boolean): Promise<void> {
  try {
    const match = inApi ? router.find(req.method, req.path) : undefined;
    if (match && 'allowed' in match && req.method === 'OPTIONS') {
      res.statusCode = 204;
      res.setHeader('Allow', [...match.allowed, ...(match.allowed.includes('GET') ? ['HEAD'] : [])].join(', '));
      res.end();
      return;
    }
    if (!match || 'allowed' in match) throw new AppError('NOT_FOUND', `No route for ${req.method} ${PREFIX}${req.path}`);
    if (hasBody(req.raw)) req.body = await readJson(req.raw, ctx.config.BODY_LIMIT_BYTES);
    req.params = match.params;
    req.route = match.route;
    const body = await match.handler(req, res);
    if (!res.headersSent) sendJson(res, body ?? {});
  } catch (err) {
    sendError(ctx.log, req, res, err);
  }
}

/** Every failure as { error, code, status } (spec §7); unknown errors are logged and answered as a generic 500. */
function sendError(log: Logger, req: ApiRequest, res: ServerResponse, err: unknown): void {
  const appErr = toAppError(err);
  if (appErr.code === 'INTERNAL') log.error({ err, request_id: req.requestId, path: req.path }, 'unhandled error');
  else if (appErr.status >= 500) log.warn({ code: appErr.code, request_id: req.requestId, path: req.path }, appErr.message);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (appErr.retryAfter !== undefined) res.setHeader('Retry-After', String(appErr.retryAfter));
  res.statusCode = appErr.status;
  sendJson(res, appErr.toBody());
}
