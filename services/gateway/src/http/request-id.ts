import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

const SAFE = /^[A-Za-z0-9._-]{8,100}$/;

/** Every request gets an id (the client's X-Request-ID when it is safe to echo), sent back and logged. */
export function requestId(req: Request, res: Response, next: NextFunction): void {
  const given = req.get('x-request-id');
  const id = given && SAFE.test(given) ? given : randomUUID();
  res.locals.requestId = id;
  res.setHeader('X-Request-ID', id);
  next();
}
