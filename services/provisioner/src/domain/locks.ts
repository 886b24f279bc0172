import pg from 'pg';
import { AppError, retry } from '@agenthost/shared';

/** A try that found the lock held by another operation: the one failure of taking it that is worth another try. */
const HELD = new Error('the instance lock is held');

/**
 * Per-instance operation locks: Postgres session advisory locks, each held on its own connection of a
 * dedicated pool for as long as an operation (create, restart, start, stop, delete, a reconcile repair)
 * works on the instance.
 *
 * - Two operations on one instance never interleave, whichever replica runs them.
 * - When a provisioner dies (even SIGKILL), its connections close and Postgres releases its locks at
 *   once: the reconciler of any replica can then tell an interrupted operation (lock free, row in an
 *   intermediate step) from one still in progress (lock held) without waiting for a timeout.
 * The pool is separate from the query pool so that lock holders can never starve the queries they
 * need to finish.
 */
export class OpLocks {
  private readonly pool: pg.Pool;

  constructor(databaseUrl: string, schema: string, size = 64) {
    // Idle connections are kept for a while: opening one costs more than the lock itself.
    this.pool = new pg.Pool({
      connectionString: databaseUrl,
      max: size,
      idleTimeoutMillis: 300_000,
      connectionTimeoutMillis: 5000,
      options: `-c search_path=${schema}`,
    });
    this.pool.on('error', () => {});
  }

  /**
   * Run fn holding the instance's lock. Waits up to waitMs (short: a caller behind a gateway timeout must get an answer) for another operation to finish, then
   * refuses with 409 INSTANCE_STATE_CONFLICT.
   */
  async with<T>(instanceId: string, fn: () => Promise<T>, waitMs = 2_000): Promise<T> {
    const release = await this.acquire(instanceId, waitMs);
    if (!release) throw new AppError('INSTANCE_STATE_CONFLICT', 'Another operation on this instance is in progress; retry shortly', { retryAfter: 1 });
    try {
      return await fn();
    } finally {
      await release();
    }
  }

  /** Run fn only when nobody holds the lock; undefined when it is held. */
  async tryWith<T>(instanceId: string, fn: () => Promise<T>): Promise<T | undefined> {
    const release = await this.acquire(instanceId, 0);
    if (!release) return undefined;
    try {
      return await fn();
    } finally {
      await release();
    }
  }

  /** Take the lock now (for create, whose instance id is new) and return its release. */
  async hold(instanceId: string): Promise<() => Promise<void>> {
    const release = await this.acquire(instanceId, 10_000);
    if (!release) throw new AppError('INSTANCE_STATE_CONFLICT');
    return release;
  }

  private async acquire(instanceId: string, waitMs: number): Promise<(() => Promise<void>) | undefined> {
    const client = await this.pool.connect();
    const take = async () => {
      const r = await client.query<{ ok: boolean }>('select pg_try_advisory_lock($1::int, hashtext($2)) as ok', [LOCK_CLASS, instanceId]);
      if (!r.rows[0]?.ok) throw HELD;
    };
    try {
      await retry(take, { delayMs: 100, until: Date.now() + waitMs, retryable: (err) => err === HELD });
    } catch (err) {
      if (err === HELD) {
        client.release();
        return undefined;
      }
      client.release(true); // a failed query: the connection may be broken
      throw err;
    }
    return async () => {
      try {
        await client.query('select pg_advisory_unlock($1::int, hashtext($2))', [LOCK_CLASS, instanceId]);
        client.release();
      } catch {
        client.release(true); // dropping the connection releases the lock anyway
      }
    };
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** First key of the two-key advisory lock space: instance operation locks of the provisioner. */
const LOCK_CLASS = 0x70726f76; // "prov"
/** The create transaction's per-user lock and the port-lease lock (transaction scoped). */
export const USER_LOCK_CLASS = 0x70726f77;
export const PORT_LOCK_CLASS = 0x70726f78;
