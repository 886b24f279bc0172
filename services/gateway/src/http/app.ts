import { randomUUID } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { AppError, context, toAppError, type Logger } from '@agenthost/shared';
import type { GatewayContext } from '../context.ts';
import { corsFor } from './cors.ts';
import { setSubscriptionHeaders } from './headers.ts';
import { mountRoutes } from './mount.ts';
import { observeRequest, startHttpSpan } from './observe.ts';
import { sendJson, type Route } from './route.ts';
import { apiRoutes } from './routes/index.ts';
import { staticFiles } from './static-files.ts';

const SAFE_ID = /^[A-Za-z0-9._-]{8,100}$/;

/**
 * The gateway's Express app: request id and default subscription headers → CORS for the configured origins (cors.ts)
 * → the API's routes under /api (mount.ts) →
 * the dashboard's built files (static-files.ts) →
 * 404 → the error body of spec §7. One access-log line per request through the service's pino logger (never
 * headers, bodies or the query string).
 */
export function buildApp(ctx: GatewayContext, routes: Route[] = apiRoutes(ctx)): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('query parser', 'simple');
  // X-Forwarded-For is believed only from a configured proxy (TRUSTED_PROXIES) and on the edge's unix socket
  // (GATEWAY_EDGE_SOCKET): anyone can send it. Only the last hop's entry is taken from the socket: the address Caddy
  // was connected from, which Caddy writes over whatever the client sent.
  app.set('trust proxy', ctx.config.TRUSTED_PROXIES.length ? ctx.config.TRUSTED_PROXIES : false);
  const trustedProxy = app.get('trust proxy fn') as (address: string | undefined, hop: number) => boolean;
  // A connection has no peer address only on a unix socket, and the edge's is the gateway's only one (listen.ts).
  app.set('trust proxy', (address: string | undefined, hop: number) => (hop === 0 && address === undefined) || trustedProxy(address, hop));
  app.use(requestContext(ctx.log));
  const crossOrigin = corsFor(ctx.config.CORS_ORIGINS);
  if (crossOrigin) app.use('/api', crossOrigin);
  app.use('/api', mountRoutes(ctx, routes));
  // The dashboard's built files at / (static-files.ts): a path that is not one of them goes on to the 404.
  const dashboard = staticFiles(ctx.config, ctx.log);
  if (dashboard) app.use((req, res, next) => void (dashboard.serve(req, res, pathOf(req.url)) || next()));
  app.use(notFound);
  app.use(errorHandler(ctx.log));
  return app;
}

function requestContext(log: Logger) {
  // The access line's fields are fixed and built here (never headers, bodies or the query string), so it skips the
  // redaction pass every other line gets: with the wildcard paths that pass costs ~16 µs a line, about a tenth of
  // the gateway's CPU per request (the line itself ~5 µs).
  const access = log.child({}, { redact: [] });
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = performance.now();
    const given = req.headers['x-request-id'];
    const requestId = typeof given === 'string' && SAFE_ID.test(given) ? given : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-ID', requestId);
    setSubscriptionHeaders(res, null, undefined);
    const path = pathOf(req.url);
    const traced = startHttpSpan(req.method, requestId);
    res.once('close', () => {
      const elapsed = performance.now() - started;
      const ms = Math.round(elapsed * 10) / 10;
      // Requests no route matched share one label: a scan of random paths must not grow the metrics.
      const traceId = observeRequest(traced?.span, (res.locals.route as string | undefined) ?? 'unmatched', req.method, res.statusCode, elapsed / 1000);
      access.info(
        {
          request_id: requestId,
          method: req.method,
          path,
          status: res.statusCode,
          ms,
          ...(res.locals.userId ? { user_id: res.locals.userId } : {}),
          ...(traceId ? { trace_id: traceId } : {}),
        },
        'request',
      );
    });
    // The rest of the request runs in its span's context: NATS requests, queries and Docker calls join its trace.
    if (traced) context.with(traced.ctx, next);
    else next();
  };
}

const pathOf = (url: string): string => {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
};

function notFound(req: Request, _res: Response, next: NextFunction): void {
  const path = pathOf(req.originalUrl);
  // Paths match case-insensitively: name the route as the API spells it.
  const shown = /^\/api(\/|$)/i.test(path) ? `/api${path.slice(4)}` : path;
  next(new AppError('NOT_FOUND', `No route for ${req.method} ${shown}`));
}

const causeOf = (e: Error): string | undefined => (e.cause === undefined ? undefined : e.cause instanceof Error ? e.cause.message : String(e.cause));

/** Every failure as { error, code, status } (spec §7); unknown errors are logged and answered as a generic 500. */
function errorHandler(log: Logger) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    const appErr = toAppError(malformedPath(err) ?? err);
    const where = { request_id: res.locals.requestId, path: pathOf(req.originalUrl) };
    if (appErr.code === 'INTERNAL') log.error({ err, ...where }, 'unhandled error');
    // An unavailable backend: its cause's message (a bus or database error, never a request's data) says which.
    else if (appErr.failure) log.warn({ code: appErr.code, ...where, cause: causeOf(appErr) }, appErr.message);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (appErr.retryAfter !== undefined) res.setHeader('Retry-After', String(appErr.retryAfter));
    res.statusCode = appErr.status;
    sendJson(res, appErr.toBody());
  };
}

/** Express's router throws a URIError for a path parameter with malformed percent-encoding. */
const malformedPath = (err: unknown): AppError | undefined =>
  err instanceof URIError ? new AppError('VALIDATION_FAILED', 'The path has malformed percent-encoding') : undefined;
