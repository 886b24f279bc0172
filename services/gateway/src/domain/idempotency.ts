import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { GatewayDB } from '../db/schema.ts';
import { openAtRest, sealAtRest } from '@agenthost/shared';

export interface KeptAnswer {
  fingerprint: string;
  startedAt: Date;
  /** null while the first request is in flight. */
  status: number | null;
  body: string | null;
  /** The answer was kept but cannot be opened here: sealed under another process's key (no GATEWAY_DATA_KEY). */
  unreadable?: true;
}

/**
 * The answers kept per user and Idempotency-Key, in the gateway's Postgres so every replica (and a restarted one) sees
 * them. A key is claimed by inserting its row before the request is forwarded: the primary key lets exactly one of
 * any number of concurrent duplicates, on any replica, win. Kept answers are sealed (a create's answer holds the
 * instance's access token), bound to their user and key.
 */
export class IdempotencyStore {
  private readonly db: Kysely<GatewayDB>;
  private readonly ttlMs: number;
  private readonly key: Buffer;
  private lastSweep = 0;

  /** Without a data key the answers are sealed under one of this process: readable by it alone (see unreadable). */
  constructor(db: Kysely<GatewayDB>, ttlMs: number, key: Buffer | undefined) {
    this.db = db;
    this.ttlMs = ttlMs;
    this.key = key ?? randomBytes(32);
  }

  /** true when this request now owns the key; an expired row is taken over in the same statement. */
  async claim(userId: string, key: string, fingerprint: string): Promise<boolean> {
    this.sweepNowAndThen();
    const expires = new Date(Date.now() + this.ttlMs);
    const won = await this.db
      .insertInto('idempotency_keys')
      .values({ user_id: userId, key, fingerprint, expires_at: expires, status: null, body: null })
      .onConflict((oc) =>
        oc
          .columns(['user_id', 'key'])
          .doUpdateSet({ fingerprint, expires_at: expires, status: null, body: null, started_at: sql`now()` } as never)
          .where('idempotency_keys.expires_at', '<', sql<Date>`now()`),
      )
      .returning('key')
      .executeTakeFirst();
    return won !== undefined;
  }

  async read(userId: string, key: string): Promise<KeptAnswer | undefined> {
    const row = await this.db
      .selectFrom('idempotency_keys')
      .select(['fingerprint', 'started_at', 'status', 'body'])
      .where('user_id', '=', userId)
      .where('key', '=', key)
      .where('expires_at', '>=', sql<Date>`now()`)
      .executeTakeFirst();
    if (!row) return undefined;
    const kept: KeptAnswer = { fingerprint: row.fingerprint, startedAt: row.started_at, status: row.status, body: null };
    if (row.body === null) return kept;
    try {
      kept.body = openAtRest(this.key, row.body, aad(userId, key));
    } catch {
      kept.unreadable = true;
    }
    return kept;
  }

  async complete(userId: string, key: string, status: number, body: string): Promise<void> {
    const sealed = sealAtRest(this.key, body, aad(userId, key));
    await this.db.updateTable('idempotency_keys').set({ status, body: sealed }).where('user_id', '=', userId).where('key', '=', key).execute();
  }

  /** Forgets a claim whose request may be tried again (a 5xx: nothing is known to have happened). */
  async release(userId: string, key: string): Promise<void> {
    await this.db.deleteFrom('idempotency_keys').where('user_id', '=', userId).where('key', '=', key).where('status', 'is', null).execute();
  }

  /** Expired rows are dropped about once a minute per replica, off the request's path. */
  private sweepNowAndThen(): void {
    if (Date.now() - this.lastSweep < 60_000) return;
    this.lastSweep = Date.now();
    void this.db
      .deleteFrom('idempotency_keys')
      .where('expires_at', '<', sql<Date>`now()`)
      .execute()
      .catch(() => {});
  }
}

const aad = (userId: string, key: string): string => `idempotency\n${userId}\n${key}`;
