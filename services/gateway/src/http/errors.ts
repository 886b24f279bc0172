import type { NextFunction, Request, Response } from 'express';
import { AppError, toAppError } from '@agenthost/shared';
import type { Logger } from '@agenthost/shared';

/** Body-parser failures → our codes; everything else through toAppError (unknown → generic 500). */
function convert(err: unknown): AppError {
  const e = err as { type?: string; status?: number } | undefined;
  if (e?.type === 'entity.too.large') return new AppError('PAYLOAD_TOO_LARGE');
  if (e?.type === 'entity.parse.failed') return new AppError('INVALID_JSON');
  if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') return new AppError('UNSUPPORTED_MEDIA_TYPE', 'Body must be UTF-8 JSON');
  if (e?.type === 'request.aborted' || e?.type === 'request.size.invalid') return new AppError('VALIDATION_FAILED', 'Request body was incomplete');
  return toAppError(err);
}

export function errorHandler(log: Logger) {
  return (err: unknown, req: Request, res: Response, next: NextFunction): void => {
    if (res.headersSent) return next(err);
    const appErr = convert(err);
    if (appErr.code === 'INTERNAL') log.error({ err, request_id: res.locals.requestId, path: req.path }, 'unhandled error');
    else if (appErr.status >= 500) log.warn({ code: appErr.code, request_id: res.locals.requestId, path: req.path }, appErr.message);
    if (appErr.retryAfter !== undefined) res.setHeader('Retry-After', String(appErr.retryAfter));
    res.status(appErr.status).json(appErr.toBody());
  };
}

export function notFound(req: Request, _res: Response, next: NextFunction): void {
  next(new AppError('NOT_FOUND', `No route for ${req.method} ${req.path}`));
}
