import { sql, type Kysely } from 'kysely';
import { AppError, type Logger } from '@agenthost/shared';
import type { KeyvaultDB } from '../db/schema.ts';

export interface LimiterOptions {
  maxPerIp: number;
  maxPerInstance: number;
  windowSeconds: number;
}

/**
 * Counts failed instance authentications per source IP and per instance id in a fixed window and
 * refuses (429 RATE_LIMITED with Retry-After) once a bucket reached its limit. It lives in keyvault's
 * database, not in gateway memory, so every gateway and keyvault replica shares one budget and a
 * restart does not reset it.
 */
export class AuthLimiter {
  /** Failed instance authentications seen by this process (logged with each failure). */
  failuresTotal = 0;
  rateLimitedTotal = 0;

  private readonly db: Kysely<KeyvaultDB>;
  private readonly opts: LimiterOptions;
  private readonly log: Logger;

  constructor(db: Kysely<KeyvaultDB>, opts: LimiterOptions, log: Logger) {
    this.db = db;
    this.opts = opts;
    this.log = log;
  }

  private maxFor(bucket: string): number {
    return bucket.startsWith('ip:') ? this.opts.maxPerIp : this.opts.maxPerInstance;
  }

  /** Throw 429 when any bucket is at its limit in the current window. */
  async check(buckets: string[], fields: Record<string, unknown>): Promise<void> {
    const rows = await this.db
      .selectFrom('auth_failures')
      .select(['bucket', 'failures', sql<number>`extract(epoch from (window_start + make_interval(secs => ${this.opts.windowSeconds}) - now()))`.as('left_s')])
      .where('bucket', 'in', buckets)
      .where('window_start', '>', sql<Date>`now() - make_interval(secs => ${this.opts.windowSeconds})`)
      .execute();
    const blocked = rows.filter((r) => r.failures >= this.maxFor(r.bucket));
    if (blocked.length === 0) return;
    const retryAfter = Math.max(1, Math.ceil(Math.max(...blocked.map((r) => Number(r.left_s)))));
    this.rateLimitedTotal++;
    this.log.warn(
      {
        event: 'instance_auth_rate_limited',
        ...fields,
        buckets: blocked.map((r) => r.bucket.split(':')[0]),
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
    const w = this.opts.windowSeconds;
    const counts: Record<string, number> = {};
    for (const bucket of buckets) {
      const row = await this.db
        .insertInto('auth_failures')
        .values({ bucket, window_start: sql<Date>`now()`, failures: 1 })
        .onConflict((oc) =>
          oc.column('bucket').doUpdateSet({
            failures: sql<number>`case when auth_failures.window_start <= now() - make_interval(secs => ${w}) then 1 else auth_failures.failures + 1 end`,
            window_start: sql<Date>`case when auth_failures.window_start <= now() - make_interval(secs => ${w}) then now() else auth_failures.window_start end`,
          }),
        )
        .returning('failures')
        .executeTakeFirstOrThrow();
      counts[`failures_${bucket.split(':')[0]}`] = row.failures;
    }
    this.log.warn({ event: 'instance_auth_failed', ...fields, ...counts, failures_total: this.failuresTotal }, 'instance authentication failed');
  }

  /** Forget an instance's failures (fresh credentials were issued, or it was deleted). */
  async reset(instanceId: string): Promise<void> {
    await this.db.deleteFrom('auth_failures').where('bucket', '=', `instance:${instanceId}`).execute();
  }

  async prune(): Promise<void> {
    await this.db
      .deleteFrom('auth_failures')
      .where('window_start', '<', sql<Date>`now() - make_interval(secs => ${this.opts.windowSeconds * 2})`)
      .execute();
  }
}
