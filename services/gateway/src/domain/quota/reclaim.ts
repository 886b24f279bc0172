import { sql, type Kysely, type RawBuilder } from 'kysely';
import { retry } from '@agenthost/shared';
import type { GatewayDB } from '../../db/schema.ts';

export interface Reclaimed {
  /** Replicas whose leases were taken back. */
  replicas: number;
  /** Requests given back to usage_counters (granted - served over their leases). */
  returned: number;
}

/**
 * Take back every lease of the replicas whose heartbeat is older than the TTL: what they were granted
 * and did not serve goes back to usage_counters, and their rows go, in one statement. Exactly once:
 * the replica rows are locked (SKIP LOCKED, so a second reclaimer passes over them instead of
 * waiting) and deleted, and only the leases of the replicas this statement deleted are returned; a
 * served count or a give-back that commits first is seen, one that comes later finds no row.
 */
export function reclaimStale(db: Kysely<GatewayDB>, ttlMs: number): Promise<Reclaimed> {
  return reclaim(
    db,
    sql`select replica_id from usage_replicas where heartbeat_at < now() - ${ttlMs}::int * interval '1 millisecond' order by replica_id for update skip locked`,
    true,
  );
}

/** At shutdown: give back everything this replica holds and unregister it (served counts written first). */
export function releaseReplica(db: Kysely<GatewayDB>, replicaId: string): Promise<Reclaimed> {
  return reclaim(db, sql`select replica_id from usage_replicas where replica_id = ${replicaId} for update`);
}

/**
 * A stale replica's leases leave a record of what each had served (usage_reclaimed): one that was only cut off from
 * the database, and served from its blocks meanwhile, adds the rest when it is back (settleReclaimed). A replica that
 * gives everything back at shutdown wrote its counts first and does not come back.
 */
async function reclaim(db: Kysely<GatewayDB>, which: RawBuilder<unknown>, record = false): Promise<Reclaimed> {
  const r = await sql<{ replicas: number; returned: number }>`
    with dead as (
      delete from usage_replicas where replica_id in (${which}) returning replica_id
    ), freed as (
      delete from usage_leases l using dead where l.replica_id = dead.replica_id
      returning l.replica_id, l.user_id, l."window", l.window_start, l.served, l.granted - l.served as unused
    ), recorded as (
      insert into usage_reclaimed (replica_id, user_id, "window", window_start, served)
      select replica_id, user_id, "window", window_start, served from freed where ${record}::boolean and "window" = 'day'
      on conflict do nothing
    ), sums as (
      select user_id, "window", window_start, sum(unused) as unused from freed group by user_id, "window", window_start
    ), back as (
      update usage_counters c set used = greatest(c.used - s.unused, 0)
      from sums s
      where c.user_id = s.user_id and c."window" = s."window" and c.window_start = s.window_start and s.unused > 0
      returning s.unused
    )
    select (select count(*) from dead)::int as replicas, coalesce((select sum(unused) from back), 0)::bigint as returned`.execute(db);
  const row = r.rows[0];
  return { replicas: Number(row?.replicas ?? 0), returned: Number(row?.returned ?? 0) };
}

/** A lease step found this replica's row gone: another replica reclaimed it (this one paused past the TTL). */
export class ReplicaReclaimed extends Error {
  constructor() {
    super('usage lease: this replica was reclaimed twice in a row');
  }
}

/** Runs a lease step again once when it finds the replica reclaimed (it registers anew first); twice in a row is thrown. */
export const onceMoreIfReclaimed = <T>(step: () => Promise<T>): Promise<T> =>
  retry(step, { attempts: 2, delayMs: 0, retryable: (err) => err instanceof ReplicaReclaimed });

/** One window's served count as the replica that was reclaimed knows it (all it served from that lease). */
export interface ServedSince {
  userId: string;
  start: number;
  served: number;
}

/**
 * A replica back after it was reclaimed: what it served of each day window past the count the reclaim saw goes onto
 * the counter, once (the record is deleted in the same statement). The count is then exact; the limit may have been
 * passed by what it served while cut off, which USAGE_OFFLINE_SECONDS bounds.
 */
export async function settleReclaimed(db: Kysely<GatewayDB>, replicaId: string, windows: ServedSince[]): Promise<number> {
  if (windows.length === 0) return 0;
  const r = await sql<{ added: number }>`
    with v as (
      select * from unnest(${windows.map((w) => w.userId)}::uuid[], ${windows.map((w) => new Date(w.start).toISOString())}::timestamptz[],
        ${windows.map((w) => w.served)}::bigint[]) as v(user_id, window_start, served)
    ), t as (
      delete from usage_reclaimed r using v
      where r.replica_id = ${replicaId} and r.user_id = v.user_id and r."window" = 'day' and r.window_start = v.window_start
      returning r.user_id, r.window_start, greatest(v.served - r.served, 0) as extra
    ), added as (
      update usage_counters c set used = c.used + t.extra
      from t where c.user_id = t.user_id and c."window" = 'day' and c.window_start = t.window_start and t.extra > 0
      returning t.extra
    )
    select coalesce(sum(extra), 0)::bigint as added from added`.execute(db);
  return Number(r.rows[0]?.added ?? 0);
}

/** Records of reclaims older than the windows they count (two days). */
export async function pruneReclaimed(db: Kysely<GatewayDB>): Promise<void> {
  await sql`delete from usage_reclaimed where reclaimed_at < now() - interval '2 days'`.execute(db);
}
