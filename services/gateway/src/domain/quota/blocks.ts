import type { NatsConnection } from 'nats';
import { AppError, type Logger } from '@agenthost/shared';
import type { LeaseLedger, LeasedWindow, WindowKind } from './store.ts';
import { askOthers } from './peers.ts';

// The blocks of quota this replica holds, per (user, window): served from memory, leased for all the
// requests waiting at once, refilled in the background at half a block, given back when idle or when
// another replica runs dry. The SQL is in store.ts, the policy (which windows, which errors) in policy.ts.

export const DAY_MS = 86_400_000;
export const MINUTE_MS = 60_000;
const FIRST_BLOCK = 4;
/** After a replica had to refuse, it re-checks the database at most this often. */
const EXHAUSTED_RECHECK_MS = 1000;
/** Prefetch is off for a key this long after anyone ran out of it. */
const CONTENTION_MS = 60_000;

interface Waiter {
  resolve: (granted: boolean) => void;
  reject: (err: unknown) => void;
}

/** A window as this replica holds it (userId, kind, start and the served counts come from LeasedWindow). */
export interface WindowState extends LeasedWindow {
  key: string;
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
  /** A minute window granted here while the database was away: its tokens were never leased, none go back. */
  local?: boolean;
  exhaustedAt: number;
  noPrefetchUntil: number;
}

export const windowStart = (kind: WindowKind, now: number): number =>
  kind === 'day' ? Math.floor(now / DAY_MS) * DAY_MS : Math.floor(now / MINUTE_MS) * MINUTE_MS;

export const keyOf = (userId: string, kind: WindowKind, start: number) => `${userId}|${kind}|${start}`;

export interface BlocksOptions {
  ledger: LeaseLedger;
  now: () => number;
  prefetchMax: number;
  idleReturnMs: number;
  /** This replica's id in the give-back protocol (its own requests are not answered). */
  origin: string;
  log?: Logger;
  nc?: NatsConnection;
  releaseJitterMs?: number;
}

/** The windows this replica holds tokens of, and the leasing, refilling and giving back of their blocks. */
export class Blocks {
  readonly states = new Map<string, WindowState>();
  private readonly options: BlocksOptions;
  private readonly pendingWrites = new Set<Promise<unknown>>();
  private stopping = false;

  constructor(opts: BlocksOptions) {
    this.options = opts;
  }

  state(userId: string, kind: WindowKind, limit: number, now: number): WindowState {
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

  take(st: WindowState): boolean | Promise<boolean> {
    const now = this.options.now();
    st.lastUse = now;
    // Tokens are served only while this replica's heartbeat is fresh, so none are served after another replica may have
    // reclaimed them; or, when a renewal finds the database unreachable at all, for a bounded time (store.ts offline()).
    const ledger = this.options.ledger;
    if (st.tokens > 0 && !ledger.fresh() && !ledger.offline()) return ledger.renew().then(this.take.bind(this, st), this.cutOff.bind(this, st));
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

  private cutOff(st: WindowState, err: unknown): boolean | Promise<boolean> {
    if (!this.options.ledger.offline()) throw err;
    return this.take(st);
  }

  /** A minute window while the database is away: a rate, not a quota, so granted from memory (never the day's). */
  private grantLocally(st: WindowState): boolean {
    if (st.kind !== 'minute' || !this.options.ledger.offline()) return false;
    st.local = true;
    st.tokens = Math.max(0, st.limit - st.served);
    this.serve(st);
    for (const w of st.waiters.splice(0)) w.resolve(false);
    return true;
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
        st.block = Math.min(this.options.prefetchMax, st.block * 2);
        st.tokens += got;
        if (got > 0) st.exhaustedAt = 0;
        this.serve(st);
        if (st.waiters.length === 0) break;
        // Everything asked for was granted: the waiters left came in during the write; lease for them.
        if (got >= want) continue;
        if (!askedOthers) {
          askedOthers = true;
          st.noPrefetchUntil = this.options.now() + CONTENTION_MS;
          // Quota held by silent replicas first (cheap, one statement), then the live ones'.
          await this.options.ledger.reclaim().catch(() => 0);
          if (this.options.nc) await askOthers(this.options.nc, st.key, this.options.origin, this.options.releaseJitterMs ?? 50, this.options.log);
          continue;
        }
        st.exhaustedAt = this.options.now();
        for (const w of st.waiters.splice(0)) w.resolve(false);
      }
    } catch (err) {
      if (this.grantLocally(st)) return;
      if (!this.options.ledger.offline()) this.options.log?.error({ err }, 'usage lease failed');
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
      st.block = Math.min(this.options.prefetchMax, st.block * 2);
      st.tokens += got;
      this.serve(st);
    } catch (err) {
      this.options.log?.warn({ err }, 'usage block prefetch failed');
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
    if (this.options.now() < st.noPrefetchUntil) return 0;
    const left = st.limit - st.dbUsed - demand;
    return Math.max(0, Math.min(st.block, this.options.prefetchMax, Math.floor(left / 8)));
  }

  /** One atomic, conditional upsert: grant min(want, limit - used), never past the limit, recorded in this replica's lease. */
  private async lease(st: WindowState, want: number): Promise<number> {
    const t0 = performance.now();
    const got = await this.options.ledger.lease(st, want, st.limit);
    const ms = performance.now() - t0;
    if (ms > 100) this.options.log?.warn({ ms: Math.round(ms), window: st.kind }, 'usage lease write was slow');
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
    if (n <= 0 || this.options.now() >= st.end || st.local) {
      st.tokens = 0;
      return Promise.resolve(0);
    }
    // Cut off from the database: the tokens stay held (the write would fail) and are served meanwhile.
    if (this.options.ledger.offline()) return Promise.resolve(0);
    st.tokens = 0;
    st.block = FIRST_BLOCK;
    const replica = this.options.ledger.replicaId;
    const p = this.options.ledger
      .giveBack(st, n)
      .then((used) => {
        if (used !== undefined) st.dbUsed = used;
        return n;
      })
      .catch((err: unknown) => {
        // Still held here (and in this replica's lease): kept, to serve or to give back later, unless the lease was
        // reclaimed meanwhile (then they went back there).
        if (replica === this.options.ledger.replicaId) st.tokens += n;
        this.options.log?.warn({ err }, 'could not return unused usage tokens; kept');
        return 0;
      });
    this.track(p);
    return p;
  }

  /** Another replica ran out of this window: give back what this one holds unused. */
  release(key: string): Promise<number> {
    const st = this.states.get(key);
    if (!st) return Promise.resolve(0);
    st.noPrefetchUntil = this.options.now() + CONTENTION_MS;
    return st.tokens === 0 ? Promise.resolve(0) : this.giveBack(st);
  }

  /** This replica's leases were reclaimed by another: what it held was given back there. */
  dropAll(): void {
    for (const st of this.states.values()) {
      st.tokens = 0;
      st.served = 0;
      st.servedDurable = 0;
      st.block = FIRST_BLOCK;
    }
  }

  /** Give back idle blocks; forget windows that ended. */
  sweep(now: number): void {
    for (const st of this.states.values()) {
      if (now >= st.end) {
        if (st.waiters.length === 0 && !st.leasing) this.states.delete(st.key);
        continue;
      }
      if (st.tokens > 0 && now - st.lastUse >= this.options.idleReturnMs && !st.leasing) void this.giveBack(st);
      else if (st.tokens === 0 && now - st.lastUse > 10 * 60_000 && !st.leasing) this.states.delete(st.key);
    }
  }

  /** At shutdown: no new blocks; wait for the writes in flight, then hold nothing (the ledger gives it all back). */
  async drain(): Promise<void> {
    this.stopping = true;
    while (this.pendingWrites.size > 0) await Promise.all([...this.pendingWrites]);
    for (const st of this.states.values()) st.tokens = 0;
  }
}
