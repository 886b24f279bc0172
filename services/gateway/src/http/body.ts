import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { AppError } from '@agenthost/shared';

/** True when the request carries a body (a length above zero, or a chunked transfer). */
export function hasBody(req: IncomingMessage): boolean {
  return Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
}

/**
 * The request's JSON body: Content-Type application/json in UTF-8 (415 otherwise), at most `limit`
 * bytes after decompression (413), a JSON object or array (400 INVALID_JSON otherwise). gzip, deflate
 * and br bodies are inflated, as Express's parser did. An empty body is {}.
 */
export async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const type = req.headers['content-type'] ?? '';
  const [mime, ...params] = type.split(';');
  if (mime!.trim().toLowerCase() !== 'application/json') throw new AppError('UNSUPPORTED_MEDIA_TYPE');
  const charset = params.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith('charset='))?.slice(8).replace(/^"|"$/g, '');
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Body must be UTF-8 JSON');
  const encoding = String(req.headers['content-encoding'] ?? 'identity').toLowerCase();
  const declared = Number(req.headers['content-length']);
  if (encoding === 'identity' && Number.isFinite(declared) && declared > limit) {
    req.resume();
    throw new AppError('PAYLOAD_TOO_LARGE');
  }
  const text = await readText(decoded(req, encoding), limit, req);
  if (text.trim() === '') return {};
  const first = text.trimStart()[0];
  if (first !== '{' && first !== '[') throw new AppError('INVALID_JSON');
  try {
    return JSON.parse(text);
  } catch {
    throw new AppError('INVALID_JSON');
  }
}

function decoded(req: IncomingMessage, encoding: string): Readable {
  switch (encoding) {
    case 'identity':
      return req;
    case 'gzip':
      return req.pipe(zlib.createGunzip());
    case 'deflate':
      return req.pipe(zlib.createInflate());
    case 'br':
      return req.pipe(zlib.createBrotliDecompress());
    default:
      req.resume();
      throw new AppError('UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${encoding} is not supported`);
  }
}

function readText(stream: Readable, limit: number, req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const fail = (err: AppError) => {
      if (settled) return;
      settled = true;
      if (stream !== req) stream.destroy();
      req.resume(); // drain what is left so the connection can answer
      reject(err);
    };
    stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) return fail(new AppError('PAYLOAD_TOO_LARGE'));
      chunks.push(c);
    });
    stream.on('end', () => {
      if (settled) return;
      settled = true;
      resolve(Buffer.concat(chunks, size).toString('utf8'));
    });
    stream.on('error', () => fail(new AppError('INVALID_JSON', 'The body could not be decompressed')));
    req.on('aborted', () => fail(new AppError('VALIDATION_FAILED', 'Request body was incomplete')));
  });
}
