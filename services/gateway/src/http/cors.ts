import cors from 'cors';
import type { NextFunction, Request, RequestHandler, Response } from 'express';

/** What a browser page may send: the token, JSON, a retry key and its own request id. */
const ALLOWED_HEADERS = ['Authorization', 'Content-Type', 'Idempotency-Key', 'X-Request-ID'];
/** What a page may read from an answer: the request id, the subscription and usage headers, and when to retry. */
const EXPOSED_HEADERS = ['X-Request-ID', 'X-Usage-Remaining', 'X-Subscription-Tier', 'X-Subscription-Expires', 'Retry-After'];

/**
 * CORS for the configured origins (CORS_ORIGINS), or nothing when none are configured. An allowed origin is echoed
 * (never `*`: answers depend on the caller's token); any other origin gets no CORS header, so its browser keeps the
 * answer from the page. An OPTIONS request that is not a preflight (no Access-Control-Request-Method) goes on to the
 * route's own 204 with Allow (mount.ts), as does a preflight from an origin not allowed.
 */
export function corsFor(origins: string[]): RequestHandler | undefined {
  if (!origins.length) return undefined;
  const allowed = new Set(origins);
  const handle = cors({
    origin: (origin, done) => done(null, origin !== undefined && allowed.has(origin) ? origin : false),
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE'],
    allowedHeaders: ALLOWED_HEADERS,
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: 600,
    optionsSuccessStatus: 204,
  });
  return (req: Request, res: Response, next: NextFunction): void => {
    // The answer differs by Origin, so a shared cache must not hand one origin's answer to another.
    res.vary('Origin');
    if (req.method === 'OPTIONS' && req.headers['access-control-request-method'] === undefined) return next();
    handle(req, res, next);
  };
}
