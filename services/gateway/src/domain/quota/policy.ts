import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { NatsConnection, Subscription as NatsSubscription } from 'nats';
import { AppError, remaining, UNLIMITED, type Logger, type TierLimits, type TierTable } from '@agenthost/shared';
import type { GatewayDB } from '../../db/schema.ts';
import type { Subscription } from '../entitlement.ts';
import { LeaseLedger } from './store.ts';
import { answerOthers } from './peers.ts';
import { Blocks, DAY_MS, keyOf, windowStart, type WindowState } from './blocks.ts';

// Usage counting without a database write per request.
//
// The quota of a (user, window) lives in one row of usage_counters; `used` is the number of requests
// GRANTED to gateway replicas so far. A replica takes a block of the quota with one atomic,
// conditional upsert (never past the limit), serves requests from it in memory, and gives back what
// it did not use when it goes idle, at shutdown, or when another replica runs out. So:
//  - the limit is never exceeded (grants are capped in one statement under the row lock);
//  - no quota is stranded: a replica that finds the row exhausted asks the others (NATS, core
//    request-many, quota/peers.ts) to give back their unused blocks, then tries once more; after
//    contention, and whenever little is left, nobody takes more than it needs at that moment;
//  - concurrent requests on one replica share one write (the waiting requests are leased together);
//  - block size adapts: it doubles while a replica keeps exhausting its blocks, is capped by
//    USAGE_PREFETCH_MAX and by 1/8 of what is left, and resets when the replica goes idle.
// A killed replica's blocks are not lost (store.ts): each replica's grants are written down per
// window with how many requests it served, that count is written (group commit, in parallel with the
// backend call) before each response leaves, and USAGE_LEASE_TTL_SECONDS after a replica's last
// heartbeat any other replica gives back exactly granted - served. So the day's count equals the
// requests admitted, killed replicas included (a request whose count was written but whose answer
// was lost with the process is counted too: it was made).

/** What "unlimited" leases against, so enterprise requests are still counted (requests_today). */
const NO_LIMIT = Number.MAX_SAFE_INTEGER;

export interface UsageOptions {
  db: Kysely<GatewayDB>;
  tiers: TierTable;
  log?: Logger;
  /** For the give-back protocol between replicas; without it a replica only sees its own blocks. */
  nc?: NatsConnection;
  /** Injectable clock (ms). */
  now?: () => number;
  prefetchMax?: number;
  idleReturnMs?: number;
  /** How long to wait for other replicas' give-back answers after the last one arrived. */
  releaseJitterMs?: number;
  /** A replica silent this long has its leases reclaimed by the others. */
  leaseTtlMs?: number;
  /** How long a replica cut off from the database serves from the blocks it holds (USAGE_OFFLINE_SECONDS). */
  offlineMs?: number;
}

export interface UsageDecision {
  /** Requests left today after this one (-1 = unlimited). */
  remainingToday: number;
  /** Resolves once this request is counted in the database; send the response only after it (never rejects). */
  counted: Promise<void>;
}

/** Counts requests against the tier's daily and per-minute limits (spec §8). */
export class Usage {
  readonly db: Kysely<GatewayDB>;
  readonly tiers: TierTable;
  private readonly now: () => number;
  private readonly blocks: Blocks;
  private readonly ledger: LeaseLedger;
  private sweeper: NodeJS.Timeout | undefined;
  private releaseSub: NatsSubscription | undefined;
  private lastPrune = 0;

  constructor(db: Kysely<GatewayDB>, tiers: TierTable, opts: Omit<UsageOptions, 'db' | 'tiers'> = {}) {
    this.db = db;
    this.tiers = tiers;
    this.now = opts.now ?? Date.now;
    const idleReturnMs = opts.idleReturnMs ?? 5000;
    const origin = randomUUID();
    this.ledger = new LeaseLedger(db, {
      ttlMs: opts.leaseTtlMs ?? 10_000,
      offlineMs: opts.offlineMs ?? 300_000,
      log: opts.log,
      now: this.now,
      onLost: () => this.blocks.dropAll(),
    });
    this.blocks = new Blocks({ ...opts, ledger: this.ledger, now: this.now, prefetchMax: opts.prefetchMax ?? 5000, idleReturnMs, origin });
    if (opts.nc) this.releaseSub = answerOthers(opts.nc, origin, (key) => this.blocks.release(key), opts.log);
    this.sweeper = setInterval(() => this.sweep(), Math.max(250, Math.floor(idleReturnMs / 2)));
    this.sweeper.unref();
  }

  /**
   * Count one request of an entitled caller: the per-minute window first (429 RATE_LIMITED with
   * Retry-After), then the day (403 DAILY_LIMIT_EXCEEDED, resets 00:00 UTC). A refused request
   * consumes nothing. The thrown AppError carries details.remainingToday for the header.
   */
  async count(userId: string, sub: Subscription): Promise<UsageDecision> {
    const limits = this.tiers[sub.tier];
    const now = this.now();
    const perMinute = limits.requests_per_minute;
    let minute: WindowState | undefined;
    if (perMinute !== UNLIMITED) {
      minute = this.blocks.state(userId, 'minute', perMinute, now);
      if (!(await this.blocks.take(minute))) {
        const retryAfter = Math.max(1, Math.ceil((minute.end - now) / 1000));
        throw new AppError('RATE_LIMITED', `Per-minute request limit of the ${sub.tier} tier reached; retry in ${retryAfter} s`, {
          retryAfter,
          details: { remainingToday: this.remainingToday(userId, limits, now) },
        });
      }
    }
    const day = this.blocks.state(userId, 'day', limits.requests_per_day === UNLIMITED ? NO_LIMIT : limits.requests_per_day, now);
    if (!(await this.blocks.take(day))) {
      if (minute) minute.tokens++; // give the minute token back: a refused request is not counted
      throw new AppError('DAILY_LIMIT_EXCEEDED', `Daily request limit of the ${sub.tier} tier reached; it resets at 00:00 UTC`, {
        retryAfter: Math.max(1, Math.ceil((day.end - now) / 1000)),
        details: { remainingToday: 0 },
      });
    }
    return { remainingToday: this.remainingToday(userId, limits, now), counted: this.ledger.served(minute ? [minute, day] : [day]) };
  }

  /** Requests counted today for a user, as this replica knows it (its last write, minus what it holds unused). */
  async requestsToday(userId: string): Promise<number> {
    const now = this.now();
    const st = this.blocks.states.get(keyOf(userId, 'day', windowStart('day', now)));
    if (st) return Math.max(0, st.dbUsed - st.tokens);
    const row = await this.db
      .selectFrom('usage_counters')
      .select('used')
      .where('user_id', '=', userId)
      .where('window', '=', 'day')
      .where('window_start', '=', new Date(windowStart('day', now)))
      .executeTakeFirst();
    return row?.used ?? 0;
  }

  /** When the current daily window ends (00:00 UTC next). */
  resetAt(): Date {
    return new Date(windowStart('day', this.now()) + DAY_MS);
  }

  private remainingToday(userId: string, limits: TierLimits, now: number): number {
    if (limits.requests_per_day === UNLIMITED) return UNLIMITED;
    const st = this.blocks.states.get(keyOf(userId, 'day', windowStart('day', now)));
    return remaining(limits.requests_per_day, st ? Math.max(0, st.dbUsed - st.tokens) : 0);
  }

  /** Now and then drop old minute rows; give back idle blocks. */
  private sweep(): void {
    const now = this.now();
    if (now - this.lastPrune > 10 * 60_000) {
      this.lastPrune = now;
      void this.db
        .deleteFrom('usage_counters')
        .where('window', '=', 'minute')
        .where('window_start', '<', new Date(now - 3600_000))
        .execute()
        .catch(() => {});
    }
    this.blocks.sweep(now);
  }

  /** At shutdown: the served counts are written, then every unused token goes back (one statement). */
  async stop(): Promise<void> {
    clearInterval(this.sweeper);
    this.releaseSub?.unsubscribe();
    await this.blocks.drain();
    await this.ledger.stop();
  }
}
