import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { AppError } from '@agenthost/shared';

/**
 * Express's JSON parser with our limits: Content-Type application/json in UTF-8 (415 otherwise), at most `limit` bytes
 * after decompression (gzip, deflate, br; 413 beyond), a JSON object or array (400 INVALID_JSON otherwise). Its
 * errors become our error codes here, so the error handler only ever sees AppErrors from it.
 */
export function jsonBodies(limit: number): RequestHandler {
  const parse = express.json({ limit, strict: true, type: 'application/json' });
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!hasBody(req)) return next();
    const refused = refusedType(req.headers['content-type'] ?? '');
    if (refused) return next(refused);
    parse(req, res, (err?: unknown) => next(err === undefined ? undefined : bodyError(err)));
  };
}

/** True when the request carries a body (a length above zero, or a chunked transfer). */
const hasBody = (req: Request): boolean => Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;

/**
 * Checked before parsing: Express's parser would skip a body of another type (handlers would see none) and would
 * decode UTF-16 and UTF-32, which no client of this API sends.
 */
function refusedType(type: string): AppError | undefined {
  const [mime, ...params] = type.split(';');
  if (mime!.trim().toLowerCase() !== 'application/json') return new AppError('UNSUPPORTED_MEDIA_TYPE');
  const charset = params
    .map((p) => p.trim().toLowerCase())
    .find((p) => p.startsWith('charset='))
    ?.slice(8)
    .replace(/^"|"$/g, '');
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') return new AppError('UNSUPPORTED_MEDIA_TYPE', 'Body must be UTF-8 JSON');
  return undefined;
}

/** body-parser's error types → our codes. What has no type is a body that could not be inflated. */
function bodyError(err: unknown): AppError {
  const e = err as { type?: string; encoding?: string };
  switch (e.type) {
    case 'entity.too.large':
      return new AppError('PAYLOAD_TOO_LARGE');
    case 'entity.parse.failed':
      return new AppError('INVALID_JSON');
    case 'charset.unsupported':
      return new AppError('UNSUPPORTED_MEDIA_TYPE', 'Body must be UTF-8 JSON');
    case 'encoding.unsupported':
      return new AppError('UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${e.encoding} is not supported`);
    case 'request.aborted':
    case 'request.size.invalid':
      return new AppError('VALIDATION_FAILED', 'Request body was incomplete');
    default:
      return new AppError('INVALID_JSON', 'The body could not be decompressed');
  }
}
