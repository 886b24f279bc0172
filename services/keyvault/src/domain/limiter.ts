import type { Kysely } from 'kysely';
import { RateLimiterPostgres, type RateLimiterRes } from 'rate-limiter-flexible';
import { AppError, postgresLimiterStore, retryAfterSeconds, type Logger } from '@agenthost/shared';
import type { KeyvaultDB } from '../db/schema.ts';

export interface LimiterOptions {
  maxPerIp: number;
  maxPerInstance: number;
  windowSeconds: number;
}

type Kind = 'ip' | 'instance';

/**
 * Counts failed instance authentications per source IP and per instance id in a fixed window and refuses (429
 * RATE_LIMITED with Retry-After) once a bucket reached its limit. A bucket is "ip:<addr>" or "instance:<id>": the
 * kind is the keyPrefix of its rate-limiter-flexible limiter, so the bucket is also its row's key. The counters live
 * in keyvault's database (RateLimiterPostgres, table instance_auth_limits), not in gateway memory, so every gateway
 * and keyvault replica shares one budget and a restart does not reset it. Unlike the gateway's sign-in limits there
 * is no in-memory block: a reset (new credentials) must free the instance on every replica at once, and a check
 * is one read.
 */
export class AuthLimiter {
  /** Failed instance authentications seen by this process (logged with each failure). */
  failuresTotal = 0;
  rateLimitedTotal = 0;

  private readonly limiters: Record<Kind, RateLimiterPostgres>;
  private readonly log: Logger;

  constructor(db: Kysely<KeyvaultDB>, opts: LimiterOptions, log: Logger) {
    const store = postgresLimiterStore(db, 'instance_auth_limits'); // made by keyvault's migration
    const limiter = (keyPrefix: Kind, points: number) => new RateLimiterPostgres({ ...store, keyPrefix, points, duration: opts.windowSeconds });
    this.limiters = { ip: limiter('ip', opts.maxPerIp), instance: limiter('instance', opts.maxPerInstance) };
    this.log = log;
  }

  /** Throw 429 when any bucket is at its limit in the current window. */
  async check(buckets: string[], fields: Record<string, unknown>): Promise<void> {
    // get(), not consume(): a check counts nothing; only fail() does, after the secret was refused.
    const counted = await Promise.all(
      buckets.map(async (bucket) => {
        const { kind, key, limiter } = this.bucket(bucket);
        return { kind, limiter, res: await limiter.get(key) };
      }),
    );
    const blocked = counted.filter((c): c is typeof c & { res: RateLimiterRes } => c.res !== null && c.res.consumedPoints >= c.limiter.points);
    if (blocked.length === 0) return;
    const retryAfter = Math.max(...blocked.map((c) => retryAfterSeconds(c.res)));
    this.rateLimitedTotal++;
    this.log.warn(
      {
        event: 'instance_auth_rate_limited',
        ...fields,
        buckets: blocked.map((c) => c.kind),
        retry_after_s: retryAfter,
        rate_limited_total: this.rateLimitedTotal,
      },
      'instance authentication rate limited',
    );
    throw new AppError('RATE_LIMITED', 'Too many failed instance authentications; retry later', { retryAfter });
  }

  /** Count one failure in every bucket and log it. */
  async fail(buckets: string[], fields: Record<string, unknown>): Promise<void> {
    this.failuresTotal++;
    const counts: Record<string, number> = {};
    // penalty(), not consume(): the failure is counted even past the limit (as a check that raced it let it in),
    // and answers 401 as it is; the next check refuses.
    for (const bucket of buckets) {
      const { kind, key, limiter } = this.bucket(bucket);
      counts[`failures_${kind}`] = (await limiter.penalty(key)).consumedPoints;
    }
    this.log.warn({ event: 'instance_auth_failed', ...fields, ...counts, failures_total: this.failuresTotal }, 'instance authentication failed');
  }

  /** Forget an instance's failures (fresh credentials were issued, or it was deleted). */
  async reset(instanceId: string): Promise<void> {
    await this.limiters.instance.delete(instanceId);
  }

  private bucket(bucket: string): { kind: Kind; key: string; limiter: RateLimiterPostgres } {
    const colon = bucket.indexOf(':');
    const kind = bucket.slice(0, colon);
    if (kind !== 'ip' && kind !== 'instance') throw new Error(`unknown rate limit bucket kind "${kind}"`);
    return { kind, key: bucket.slice(colon + 1), limiter: this.limiters[kind] };
  }
}
