import type { Kysely } from 'kysely';
import type { Logger } from '@agenthost/shared';
import type { GatewayDB } from '../../db/schema.ts';
import { pruneReclaimed, settleReclaimed, type ServedSince } from './reclaim.ts';

// A gateway replica cut off from its database (an outage, a partition) keeps serving from the quota blocks it holds
// for a while (store.ts offline()), and makes the count exact once the database is back.

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

/** Whether the replica reaches its database, and since when it has not. */
export class DatabaseReach {
  /** The last statement could not reach the database (the next one that does clears it). */
  cutOff = false;
  /** performance.now() when a statement last reached the database (0: none yet). */
  private contactAt = 0;
  private readonly offlineMs: number;
  private readonly log: Logger | undefined;

  constructor(offlineMs: number, log?: Logger) {
    this.offlineMs = offlineMs;
    this.log = log;
  }

  /** Cut off for less than offlineMs since the database last answered. */
  offline(): boolean {
    return this.cutOff && this.contactAt > 0 && performance.now() - this.contactAt < this.offlineMs;
  }

  /** A statement's result, noting whether it reached the database. */
  async reached<T>(statement: Promise<T>): Promise<T> {
    try {
      const result = await statement;
      this.contactAt = performance.now();
      if (this.cutOff) this.log?.info('usage counting reaches the database again; writing the counts kept meanwhile');
      this.cutOff = false;
      return result;
    } catch (err) {
      if (unreachable(err)) {
        if (!this.cutOff) this.log?.warn({ err, offline_s: this.offlineMs / 1000 }, 'usage counting cannot reach the database; serving from the blocks held');
        this.cutOff = true;
      }
      throw err;
    }
  }
}

/**
 * What a replica served of each day window, for the case it finds itself reclaimed: it then adds what it served past
 * the count the reclaim recorded (reclaim.ts settleReclaimed), retried until the database takes it.
 */
export class ReclaimSettles {
  private readonly counting = new Set<ServedSince & { kind: string }>();
  private readonly pending: { replica: string; windows: ServedSince[] }[] = [];
  private lastPrune = 0;
  private readonly db: Kysely<GatewayDB>;
  private readonly reach: DatabaseReach;
  private readonly log: Logger | undefined;

  constructor(db: Kysely<GatewayDB>, reach: DatabaseReach, log?: Logger) {
    this.db = db;
    this.reach = reach;
    this.log = log;
  }

  /** A day window this replica served from (the window object itself: its served count keeps growing). */
  note(w: ServedSince & { kind: string }): void {
    if (w.kind === 'day') this.counting.add(w);
  }

  /** The replica's id was reclaimed: remember what it served under it, and settle it now if the database answers. */
  reclaimed(replica: string): void {
    const windows = [...this.counting].filter((w) => w.served > 0).map((w) => ({ userId: w.userId, start: w.start, served: w.served }));
    this.counting.clear();
    if (windows.length === 0) return;
    this.pending.push({ replica, windows });
    void this.settle().catch(() => {});
  }

  async settle(): Promise<void> {
    while (this.pending.length > 0) {
      const { replica, windows } = this.pending[0]!;
      const added = await this.reach.reached(settleReclaimed(this.db, replica, windows));
      this.pending.shift();
      if (added > 0) this.log?.info({ replica, added }, 'counted the requests served while this replica was cut off and reclaimed');
    }
  }

  /** Now and then: windows over for two days are forgotten, and old reclaim records go. */
  prune(now: number): void {
    if (now - this.lastPrune < 10 * MINUTE_MS) return;
    this.lastPrune = now;
    for (const w of this.counting) if (w.start < now - 2 * DAY_MS) this.counting.delete(w);
    void pruneReclaimed(this.db).catch(() => {});
  }
}

/**
 * Whether an error means the database was not reached (refused, reset, timed out, shutting down), rather than a
 * statement it refused: an SQLSTATE outside class 08 (connection) and 57 (operator intervention) came from it.
 */
function unreachable(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code.startsWith('08') || code.startsWith('57');
  return true;
}
