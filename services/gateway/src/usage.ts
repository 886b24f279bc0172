import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { NatsConnection, Subscription as NatsSubscription } from 'nats';
import { AppError, remaining, UNLIMITED, type Logger, type TierLimits, type TierTable } from '@agenthost/shared';
import type { GatewayDB } from './db/schema.ts';
import type { Subscription } from './entitlement.ts';
import { LeaseLedger, type LeasedWindow, type WindowKind } from './quota/leases.ts';
import { answerOthers, askOthers } from './quota/peers.ts';

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
// A killed replica's blocks are not lost (quota/leases.ts): each replica's grants are written down per
// window with how many requests it served, that count is written (group commit, in parallel with the
// backend call) before each response leaves, and USAGE_LEASE_TTL_SECONDS after a replica's last
// heartbeat any other replica gives back exactly granted - served. So the day's count equals the
// requests admitted, killed replicas included (a request whose count was written but whose answer
// was lost with the process is counted too: it was made).

export type { WindowKind } from './quota/leases.ts';

const DAY_MS = 86_400_000;
const MINUTE_MS = 60_000;
/** What "unlimited" leases against, so enterprise requests are still counted (requests_today). */
const NO_LIMIT = Number.MAX_SAFE_INTEGER;
const FIRST_BLOCK = 4;
/** After a replica had to refuse, it re-checks the database at most this often. */
const EXHAUSTED_RECHECK_MS = 1000;
/** Prefetch is off for a key this long after anyone ran out of it. */
const CONTENTION_MS = 60_000;
export { RELEASE_SUBJECT } from './quota/peers.ts';

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
}

export interface UsageDecision {
  /** Requests left today after this one (-1 = unlimited). */
  remainingToday: number;
  /** Resolves once this request is counted in the database; send the response only after it (never rejects). */
  counted: Promise<void>;
}

interface Waiter {
  resolve: (granted: boolean) => void;
  reject: (err: unknown) => void;
}

interface WindowState extends LeasedWindow {
  key: string;
  userId: string;
  kind: WindowKind;
  start: number;
  end: number;
  /** The limit the blocks were leased under. */
  limit: number;
  /** Leased and not yet used, held by this replica. */
  tokens: number;
  /** `used` in the database after this replica's last write (granted to all replicas). */
  dbUsed: number;
  block: number;
  lastUse: number;
  waiters: Waiter[];
  leasing: boolean;
  exhaustedAt: number;
  noPrefetchUntil: number;
}

export const windowStart = (kind: WindowKind, now: number): number =>
  kind === 'day' ? Math.floor(now / DAY_MS) * DAY_MS : Math.floor(now / MINUTE_MS) * MINUTE_MS;

/** Counts requests against the tier's daily and per-minute limits (spec §8). */
export class Usage {
  readonly db: Kysely<GatewayDB>;
  readonly tiers: TierTable;
  private readonly o: UsageOptions;
  private readonly now: () => number;
  private readonly prefetchMax: number;
  private readonly idleReturnMs: number;
  private readonly states = new Map<string, WindowState>();
  private readonly origin = randomUUID();
  private sweeper: NodeJS.Timeout | undefined;
  private releaseSub: NatsSubscription | undefined;
  private readonly ledger: LeaseLedger;
  private pendingWrites = new Set<Promise<unknown>>();
  private lastPrune = 0;
  private stopping = false;

  constructor(db: Kysely<GatewayDB>, tiers: TierTable, opts: Omit<UsageOptions, 'db' | 'tiers'> = {}) {
    this.db = db;
    this.tiers = tiers;
    this.o = { db, tiers, ...opts };
    this.now = opts.now ?? Date.now;
    this.prefetchMax = opts.prefetchMax ?? 5000;
    this.idleReturnMs = opts.idleReturnMs ?? 5000;
    this.ledger = new LeaseLedger(db, { ttlMs: opts.leaseTtlMs ?? 10_000, log: opts.log, now: this.now, onLost: () => this.dropAll() });
    if (opts.nc) this.releaseSub = answerOthers(opts.nc, this.origin, (key) => this.release(key));
    this.sweeper = setInterval(() => this.sweep(), Math.max(250, Math.floor(this.idleReturnMs / 2)));
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
      minute = this.state(userId, 'minute', perMinute, now);
      if (!(await this.take(minute))) {
        const retryAfter = Math.max(1, Math.ceil((minute.end - now) / 1000));
        throw new AppError('RATE_LIMITED', `Per-minute request limit of the ${sub.tier} tier reached; retry in ${retryAfter} s`, {
          retryAfter,
          details: { remainingToday: this.remainingToday(userId, limits, now) },
        });
      }
    }
    const day = this.state(userId, 'day', limits.requests_per_day === UNLIMITED ? NO_LIMIT : limits.requests_per_day, now);
    if (!(await this.take(day))) {
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
    const st = this.states.get(keyOf(userId, 'day', windowStart('day', now)));
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
    const st = this.states.get(keyOf(userId, 'day', windowStart('day', now)));
    return remaining(limits.requests_per_day, st ? Math.max(0, st.dbUsed - st.tokens) : 0);
  }

  private state(userId: string, kind: WindowKind, limit: number, now: number): WindowState {
    const start = windowStart(kind, now);
    const key = keyOf(userId, kind, start);
    let st = this.states.get(key);
    if (!st) {
      // A busy user's next window starts with the block size the last one reached, so the first
      // requests of a new minute do not each wait for a small lease.
      const prev = this.states.get(keyOf(userId, kind, start - (kind === 'day' ? DAY_MS : MINUTE_MS)));
      st = {
        key,
        userId,
        kind,
        start,
        end: start + (kind === 'day' ? DAY_MS : MINUTE_MS),
        limit,
        tokens: 0,
        served: 0,
        servedDurable: 0,
        dbUsed: 0,
        block: prev && now - prev.lastUse < 5000 ? prev.block : FIRST_BLOCK,
        lastUse: now,
        waiters: [],
        leasing: false,
        exhaustedAt: 0,
        noPrefetchUntil: 0,
      };
      this.states.set(key, st);
    } else if (st.limit !== limit) {
      // The tier changed: what was leased under the old limit goes back, the new limit applies from here.
      this.giveBack(st);
      st.limit = limit;
      st.exhaustedAt = 0;
    }
    return st;
  }

  private take(st: WindowState): boolean | Promise<boolean> {
    const now = this.now();
    st.lastUse = now;
    // Tokens are served only while this replica's heartbeat is fresh, so none are served after another replica may have reclaimed them.
    if (st.tokens > 0 && !this.ledger.fresh()) return this.ledger.renew().then(() => this.take(st));
    if (st.tokens > 0) {
      st.tokens--;
      // Low water at half a block: the next block is fetched in the background while the other half lasts, so
      // requests never wait for the write (a commit that waits ~50 ms for the disk once stalled every request).
      if (st.tokens * 2 < st.block && !st.leasing && !st.exhaustedAt && !this.stopping && this.prefetch(st, 0) > 0) this.track(this.refill(st));
      return true;
    }
    if (st.exhaustedAt && now - st.exhaustedAt < EXHAUSTED_RECHECK_MS && st.waiters.length === 0 && !st.leasing) return false;
    return new Promise<boolean>((resolve, reject) => {
      st.waiters.push({ resolve, reject });
      if (!st.leasing) this.track(this.pump(st));
    });
  }

  /** Lease for everyone waiting (one write), serve them, and when the row is exhausted ask the other replicas once. */
  private async pump(st: WindowState): Promise<void> {
    st.leasing = true;
    let askedOthers = false;
    try {
      while (st.waiters.length > 0) {
        const demand = st.waiters.length;
        const want = demand + this.prefetch(st, demand);
        const got = await this.lease(st, want);
        // Needing a lease means the last block ran out: the next one may be twice as large.
        st.block = Math.min(this.prefetchMax, st.block * 2);
        st.tokens += got;
        if (got > 0) st.exhaustedAt = 0;
        this.serve(st);
        if (st.waiters.length === 0) break;
        // Everything asked for was granted: the waiters left came in during the write; lease for them.
        if (got >= want) continue;
        if (!askedOthers) {
          askedOthers = true;
          st.noPrefetchUntil = this.now() + CONTENTION_MS;
          // Quota held by silent replicas first (cheap, one statement), then the live ones'.
          const reclaimed = await this.ledger.reclaim().catch(() => 0);
          if (this.o.nc && reclaimed === 0) await askOthers(this.o.nc, st.key, this.origin, this.o.releaseJitterMs ?? 50, this.o.log);
          continue;
        }
        st.exhaustedAt = this.now();
        for (const w of st.waiters.splice(0)) w.resolve(false);
      }
    } catch (err) {
      this.o.log?.error({ err }, 'usage lease failed');
      const e = new AppError('SERVICE_UNAVAILABLE', 'Usage counting is unavailable; retry shortly', { retryable: true, retryAfter: 1, cause: err });
      for (const w of st.waiters.splice(0)) w.reject(e);
    } finally {
      st.leasing = false;
    }
  }

  /** A background lease of the next block (no one waiting yet); waiters that arrive meanwhile are served after it. */
  private async refill(st: WindowState): Promise<void> {
    st.leasing = true;
    try {
      const got = await this.lease(st, this.prefetch(st, 0));
      st.block = Math.min(this.prefetchMax, st.block * 2);
      st.tokens += got;
      this.serve(st);
    } catch (err) {
      this.o.log?.warn({ err }, 'usage block prefetch failed');
    } finally {
      st.leasing = false;
    }
    if (st.waiters.length > 0) this.track(this.pump(st));
  }

  /** Remember a lease in flight, so stop() can wait for it before giving everything back. */
  private track(p: Promise<unknown>): void {
    this.pendingWrites.add(p);
    void p.finally(() => this.pendingWrites.delete(p));
  }

  private serve(st: WindowState): void {
    while (st.tokens > 0 && st.waiters.length > 0) {
      st.tokens--;
      st.waiters.shift()!.resolve(true);
    }
  }

  /** Extra tokens to take beyond the demand: none under contention or when little is left. */
  private prefetch(st: WindowState, demand: number): number {
    if (this.now() < st.noPrefetchUntil) return 0;
    const left = st.limit - st.dbUsed - demand;
    return Math.max(0, Math.min(st.block, this.prefetchMax, Math.floor(left / 8)));
  }

  /** One atomic, conditional upsert: grant min(want, limit - used), never past the limit, recorded in this replica's lease. */
  private async lease(st: WindowState, want: number): Promise<number> {
    const t0 = performance.now();
    const got = await this.ledger.lease(st, want, st.limit);
    const ms = performance.now() - t0;
    if (ms > 100) this.o.log?.warn({ ms: Math.round(ms), window: st.kind }, 'usage lease write was slow');
    if (!got) {
      st.dbUsed = Math.max(st.dbUsed, st.limit);
      return 0;
    }
    st.dbUsed = got.used;
    return got.granted;
  }

  /** Return unused tokens of a window still open (one write); a closed window's tokens simply lapse. */
  private giveBack(st: WindowState): Promise<number> {
    const n = st.tokens;
    if (n <= 0 || this.now() >= st.end) {
      st.tokens = 0;
      return Promise.resolve(0);
    }
    st.tokens = 0;
    st.block = FIRST_BLOCK;
    const p = this.ledger
      .giveBack(st, n)
      .then((used) => {
        if (used !== undefined) st.dbUsed = used;
        return n;
      })
      .catch((err: unknown) => {
        this.o.log?.warn({ err }, 'could not return unused usage tokens');
        return 0;
      });
    this.track(p);
    return p;
  }

  /** Another replica ran out of this window: give back what this one holds unused. */
  private release(key: string): Promise<number> {
    const st = this.states.get(key);
    if (!st) return Promise.resolve(0);
    st.noPrefetchUntil = this.now() + CONTENTION_MS;
    return st.tokens === 0 ? Promise.resolve(0) : this.giveBack(st);
  }

  /** This replica's leases were reclaimed by another: what it held was given back there. */
  private dropAll(): void {
    for (const st of this.states.values()) {
      st.tokens = 0;
      st.served = 0;
      st.servedDurable = 0;
      st.block = FIRST_BLOCK;
    }
  }

  /** Give back idle blocks; forget windows that ended; now and then drop old minute rows. */
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
    for (const st of this.states.values()) {
      if (now >= st.end) {
        if (st.waiters.length === 0 && !st.leasing) this.states.delete(st.key);
        continue;
      }
      if (st.tokens > 0 && now - st.lastUse >= this.idleReturnMs && !st.leasing) void this.giveBack(st);
      else if (st.tokens === 0 && now - st.lastUse > 10 * 60_000 && !st.leasing) this.states.delete(st.key);
    }
  }

  /** At shutdown: the served counts are written, then every unused token goes back (one statement). */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.sweeper);
    this.releaseSub?.unsubscribe();
    while (this.pendingWrites.size > 0) await Promise.all([...this.pendingWrites]);
    for (const st of this.states.values()) st.tokens = 0;
    await this.ledger.stop();
  }
}

const keyOf = (userId: string, kind: WindowKind, start: number) => `${userId}|${kind}|${start}`;
