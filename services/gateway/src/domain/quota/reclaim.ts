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
  );
}

/** At shutdown: give back everything this replica holds and unregister it (served counts written first). */
export function releaseReplica(db: Kysely<GatewayDB>, replicaId: string): Promise<Reclaimed> {
  return reclaim(db, sql`select replica_id from usage_replicas where replica_id = ${replicaId} for update`);
}

async function reclaim(db: Kysely<GatewayDB>, which: RawBuilder<unknown>): Promise<Reclaimed> {
  const r = await sql<{ replicas: number; returned: number }>`
    with dead as (
      delete from usage_replicas where replica_id in (${which}) returning replica_id
    ), freed as (
      delete from usage_leases l using dead where l.replica_id = dead.replica_id
      returning l.user_id, l."window", l.window_start, l.granted - l.served as unused
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
