import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Request, Response } from 'express';
import { AppError, toAppError } from '@agenthost/shared';
import type { GatewayContext } from '../context.ts';
import type { KeptAnswer } from '../domain/idempotency.ts';

const KEY = /^[\x21-\x7e]{1,255}$/;
const UNKNOWN =
  'The request that first used this Idempotency-Key never finished, or its answer is not readable here (its gateway stopped, or the deployment has no GATEWAY_DATA_KEY); its outcome is unknown: check the resource (e.g. GET /instance/list) and retry with a new key';

/**
 * Idempotency-Key on a POST or DELETE (Stripe's rules): the first answer is kept for IDEMPOTENCY_TTL_HOURS and given
 * again, marked `Idempotency-Replayed: true`, to a retry with the same key and request; the same key with another
 * request is 422 IDEMPOTENCY_KEY_REUSED. Of concurrent duplicates exactly one runs; the others wait for its answer.
 * Returns the body to send, or undefined after answering itself (a replay).
 */
export async function idempotent(ctx: GatewayContext, req: Request, res: Response, userId: string, key: string, run: () => Promise<unknown>): Promise<unknown> {
  if (!KEY.test(key)) throw new AppError('VALIDATION_FAILED', 'Idempotency-Key must be 1 to 255 printable ASCII characters');
  const store = ctx.idempotency;
  const fingerprint = fingerprintOf(req);
  const deadline = Date.now() + ctx.config.IDEMPOTENCY_WAIT_SECONDS * 1000;
  for (let pause = 20; ; pause = Math.min(pause * 2, 250)) {
    if (await store.claim(userId, key, fingerprint)) break;
    const kept = await store.read(userId, key);
    if (!kept) continue; // released or expired between the two statements: claim again
    if (kept.fingerprint !== fingerprint) throw new AppError('IDEMPOTENCY_KEY_REUSED');
    if (kept.unreadable) throw new AppError('IDEMPOTENCY_KEY_IN_FLIGHT', UNKNOWN, { details: { outcome: 'unknown' } });
    if (kept.status !== null) return replay(res, kept);
    if (Date.now() - kept.startedAt.getTime() > ctx.config.IDEMPOTENCY_IN_FLIGHT_SECONDS * 1000) {
      // Its gateway died mid-request: whether it happened is unknown, so it is never run a second time.
      throw new AppError('IDEMPOTENCY_KEY_IN_FLIGHT', UNKNOWN, { details: { outcome: 'unknown' } });
    }
    if (Date.now() > deadline) throw new AppError('IDEMPOTENCY_KEY_IN_FLIGHT', undefined, { retryable: true, retryAfter: 1 });
    await sleep(pause);
  }
  let body: unknown;
  try {
    body = await run();
  } catch (err) {
    const e = toAppError(err);
    // A refusal is an answer (kept); a 5xx says nothing happened that we know of, so the key is free to try again.
    if (e.status < 500) await store.complete(userId, key, e.status, JSON.stringify(e.toBody()));
    else await store.release(userId, key);
    throw err;
  }
  if (res.headersSent) await store.release(userId, key);
  else await store.complete(userId, key, res.statusCode, JSON.stringify(body ?? {}));
  return body;
}

function replay(res: Response, kept: KeptAnswer): undefined {
  res.statusCode = kept.status!;
  res.setHeader('Idempotency-Replayed', 'true');
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end(kept.body ?? '{}');
  return undefined;
}

/** The request as a retry must repeat it: method, path (with query) and the JSON body with its keys in order. */
function fingerprintOf(req: Request): string {
  return createHash('sha256')
    .update(`${req.method} ${req.originalUrl}\n${canonical(req.body)}`)
    .digest('hex');
}

const canonical = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v ?? null);
};
