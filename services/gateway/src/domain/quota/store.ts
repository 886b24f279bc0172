import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { AppError, type Logger } from '@agenthost/shared';
import type { GatewayDB } from '../../db/schema.ts';
import { beat, leaseBlock, register, returnBlock } from './ledger-sql.ts';
import { DatabaseReach, ReclaimSettles } from './cut-off.ts';
import { onceMoreIfReclaimed, ReplicaReclaimed, reclaimStale, releaseReplica } from './reclaim.ts';
import { writeServed } from './served.ts';
import { observeLease } from '../metrics.ts';

// The durable side of this replica's quota leases (policy.ts and blocks.ts keep the tokens in memory).
//
// Every block leased is added to this replica's row in usage_leases in the same statement that takes it
// from usage_counters, and every block given back is taken off it in the statement that returns it. The
// requests admitted from a lease are added to `served` by one group-committed UPDATE that runs while the
// request is forwarded; the response waits for it. So at any moment granted - served (in the database)
// is what the replica holds unused plus requests not answered yet, and when the replica dies that is
// exactly what another replica gives back (reclaim.ts) once the heartbeat is older than the TTL.
//
// A replica serves from its tokens while its last heartbeat is well within the TTL (FENCE), and, when the database
// cannot be reached at all, for up to USAGE_OFFLINE_SECONDS after it last was (offline()): the requests it serves
// meanwhile are counted in memory and written when the database is back. Another replica may reclaim its leases
// meanwhile (a partition); the replica then finds itself reclaimed, and adds what it served past the count the reclaim
// recorded (reclaim.ts settleReclaimed). So the count is exact once it settles, and the limit can be passed only by
// what a replica cut off from the database served from the blocks it held.

export type WindowKind = 'day' | 'minute';

/** One window this replica leases from; blocks.ts's window state carries these fields. */
export interface LeasedWindow {
  userId: string;
  kind: WindowKind;
  start: number;
  /** Requests served from this replica's lease of the window (since the lease row was made). */
  served: number;
  /** The part of `served` known to be in the database. */
  servedDurable: number;
}

export interface LeaseLedgerOptions {
  ttlMs: number;
  log?: Logger;
  /** Window clock (ms), the one policy.ts uses; freshness always uses the real monotonic clock. */
  now: () => number;
  /** This replica's leases were reclaimed (it was unreachable past the TTL): drop every token held. */
  onLost: () => void;
  /** How long after it last reached the database a replica cut off from it still serves from its tokens. */
  offlineMs: number;
}

/** Serve from tokens only while the last heartbeat is younger than this share of the TTL. */
const FENCE = 0.75;
/**
 * Writes of served counts running at once. One: the requests admitted while it runs share the next, and it runs
 * while their calls are forwarded, which take longer than the write (bench/gateway/hops.ts: the write's p50 a third
 * of the call's). Two overlapped one write's round trip with the other's commit, at 0.62 row writes per request
 * against 0.34–0.44 with one (same runs), each a Postgres statement and two wake-ups on a machine whose tail is
 * run-queue waits.
 */
const MAX_WRITES_IN_FLIGHT = 1;

interface Batch {
  promise: Promise<void>;
  resolve: () => void;
}

export class LeaseLedger {
  replicaId = randomUUID();
  private readonly db: Kysely<GatewayDB>;
  private readonly options: LeaseLedgerOptions;
  private registered: Promise<void> | undefined;
  /** performance.now() when the last heartbeat that succeeded was sent (0: none yet). */
  private heartbeatSentAt = 0;
  private renewing: Promise<void> | undefined;
  private readonly dirty = new Set<LeasedWindow>();
  /** The requests waiting for the next write of served counts. */
  private next: Batch | undefined;
  private scheduled = false;
  private readonly writes = new Set<Promise<void>>();
  private timer: NodeJS.Timeout;
  private readonly reach: DatabaseReach;
  private readonly settles: ReclaimSettles;

  constructor(db: Kysely<GatewayDB>, opts: LeaseLedgerOptions) {
    this.db = db;
    this.options = opts;
    this.reach = new DatabaseReach(opts.offlineMs, opts.log);
    this.settles = new ReclaimSettles(db, this.reach, opts.log);
    this.timer = setInterval(() => void this.tick(), Math.max(100, Math.floor(opts.ttlMs / 4)));
    this.timer.unref();
  }

  /** This replica's row exists (made once, again after the replica was reclaimed). */
  ready(): Promise<void> {
    this.registered ??= (async () => {
      const sent = performance.now();
      await this.reached(register(this.db, this.replicaId));
      this.heartbeatSentAt = sent;
    })().catch((err: unknown) => {
      this.registered = undefined;
      throw err;
    });
    return this.registered;
  }

  /** Cut off from the database, for less than offlineMs yet: tokens held may still be served (cut-off.ts). */
  offline(): boolean {
    return this.reach.offline();
  }

  private reached<T>(statement: Promise<T>): Promise<T> {
    return this.reach.reached(statement);
  }

  /** May tokens be served now: is the last heartbeat well inside the TTL? */
  fresh(): boolean {
    return this.heartbeatSentAt > 0 && performance.now() - this.heartbeatSentAt < this.options.ttlMs * FENCE;
  }

  /** Heartbeat now (shared by concurrent callers); throws 503 when the database cannot be reached. */
  renew(): Promise<void> {
    this.renewing ??= this.heartbeat()
      .catch((err: unknown) => {
        throw new AppError('SERVICE_UNAVAILABLE', 'Usage counting is unavailable; retry shortly', { retryable: true, retryAfter: 1, cause: err });
      })
      .finally(() => (this.renewing = undefined));
    return this.renewing;
  }

  /**
   * Take up to `want` (never past `limit`) from the window's counter and add it to this replica's lease,
   * in one statement. undefined: the counter is exhausted.
   */
  async lease(w: LeasedWindow, want: number, limit: number): Promise<{ used: number; granted: number } | undefined> {
    try {
      const r = await this.take(w, want, limit);
      observeLease(r ? 'granted' : 'exhausted', r?.granted);
      return r;
    } catch (err) {
      observeLease('error');
      throw err;
    }
  }

  private async take(w: LeasedWindow, want: number, limit: number): Promise<{ used: number; granted: number } | undefined> {
    return onceMoreIfReclaimed(async () => {
      await this.ready();
      const replica = this.replicaId;
      const r = await this.reached(leaseBlock(this.db, replica, w, want, limit));
      if (r.alive) return r.used === null ? undefined : { used: r.used, granted: r.granted };
      if (replica === this.replicaId) this.lost();
      throw new ReplicaReclaimed();
    });
  }

  /**
   * Give `n` unused tokens back: off this replica's lease and off the counter, in one statement. A lease
   * already reclaimed returns nothing (the reclaimer gave them back). Resolves to `used` after, if returned.
   */
  async giveBack(w: LeasedWindow, n: number): Promise<number | undefined> {
    return this.reached(returnBlock(this.db, this.replicaId, w, n));
  }

  /**
   * Count one admitted request in each window; resolves when that count is in the database. Requests
   * that arrive while a write is in flight share the next one. Never rejects: if the write fails, the
   * count stays pending and is written by a later one (a replica that dies meanwhile undercounts, never
   * overcounts).
   */
  served(windows: LeasedWindow[]): Promise<void> {
    for (const w of windows) {
      w.served++;
      this.dirty.add(w);
      this.settles.note(w);
    }
    if (!this.next) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.next = { promise, resolve };
    }
    const p = this.next.promise;
    this.schedule();
    return p;
  }

  /** Write every pending served count (and wait for the writes in flight). */
  async flush(): Promise<void> {
    if (this.next || this.dirty.size > 0) this.startWrite();
    await Promise.all([...this.writes]);
  }

  /**
   * Start a write at the end of this turn of the event loop (the requests of the turn share it), unless
   * MAX_WRITES_IN_FLIGHT are running: then the requests gather until one of them ends.
   */
  private schedule(): void {
    if (this.scheduled || this.writes.size >= MAX_WRITES_IN_FLIGHT) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.startWrite();
    });
  }

  private startWrite(): void {
    const batch = this.next;
    this.next = undefined;
    if (!batch && this.dirty.size === 0) return;
    const w = this.writeServed().then(() => batch?.resolve());
    this.writes.add(w);
    void w.finally(() => {
      this.writes.delete(w);
      if (this.next) this.schedule();
    });
  }

  /** One UPDATE for every window with new served requests; absolute values, so a retry never counts twice. */
  private async writeServed(): Promise<void> {
    const items = [...this.dirty].map((w) => ({ w, served: w.served }));
    this.dirty.clear();
    if (items.length === 0) return;
    const t0 = performance.now();
    try {
      await this.reached(writeServed(this.db, this.replicaId, items));
      for (const i of items) i.w.servedDurable = Math.max(i.w.servedDurable, i.served);
    } catch (err) {
      if (!this.reach.cutOff) this.options.log?.warn({ err }, 'could not write served usage counts; retrying');
      for (const i of items) if (i.w.served > i.w.servedDurable) this.dirty.add(i.w);
    }
    const ms = performance.now() - t0;
    if (ms > 100) this.options.log?.warn({ ms: Math.round(ms), windows: items.length }, 'usage served write was slow');
  }

  /** Heartbeat; a replica that finds its row gone was reclaimed. */
  private async heartbeat(): Promise<void> {
    await this.ready();
    const sent = performance.now();
    const replica = this.replicaId;
    if (await this.reached(beat(this.db, replica, this.options.now()))) this.heartbeatSentAt = Math.max(this.heartbeatSentAt, sent);
    else if (replica === this.replicaId) {
      this.lost();
      await this.ready();
    }
  }

  /** Reclaimed while alive (the database was out of reach past the TTL): start over under a new id. */
  private lost(): void {
    this.options.log?.warn({ replica: this.replicaId }, "this replica's usage leases were reclaimed; dropping its tokens");
    this.settles.reclaimed(this.replicaId);
    this.replicaId = randomUUID();
    this.registered = undefined;
    this.heartbeatSentAt = 0;
    this.dirty.clear();
    this.options.onLost();
  }

  /** Heartbeat, retry failed served writes, and reclaim the leases of replicas gone silent. */
  private async tick(): Promise<void> {
    try {
      await this.heartbeat();
      if (this.dirty.size > 0 && this.writes.size === 0) this.startWrite(); // counts whose write failed
      await this.settles.settle();
      await this.reclaim();
      this.settles.prune(this.options.now());
    } catch (err) {
      this.options.log?.warn({ err }, 'usage lease heartbeat failed');
    }
  }

  /** Give back what silent replicas held (also run when a window runs dry). */
  async reclaim(): Promise<number> {
    const r = await reclaimStale(this.db, this.options.ttlMs);
    if (r.replicas > 0) this.options.log?.info({ replicas: r.replicas, returned: r.returned }, 'reclaimed the usage leases of silent gateway replicas');
    return r.returned;
  }

  /** At shutdown: write the served counts, then give back everything held and unregister. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    if (this.registered) await releaseReplica(this.db, this.replicaId);
  }
}
