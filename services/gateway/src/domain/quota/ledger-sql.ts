import { sql, type Kysely } from 'kysely';
import type { GatewayDB } from '../../db/schema.ts';

// The statements of a replica's lease ledger (store.ts), each one round trip.

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

export interface Window {
  userId: string;
  kind: 'day' | 'minute';
  start: number;
}

/**
 * Take up to `want` (never past `limit`) from the window's counter and add it to the replica's lease, in one
 * statement. alive false: the replica's row is gone (reclaimed). used null: the counter is exhausted.
 */
export async function leaseBlock(db: Kysely<GatewayDB>, replica: string, w: Window, want: number, limit: number) {
  const r = await sql<{ alive: number; used: number | null; last_grant: number | null }>`
    with me as (
      select replica_id from usage_replicas where replica_id = ${replica} for share
    ), g as (
      insert into usage_counters (user_id, "window", window_start, used, last_grant)
      select ${w.userId}, ${w.kind}, ${new Date(w.start)}, least(${want}::bigint, ${limit}::bigint), least(${want}::bigint, ${limit}::bigint) from me
      on conflict (user_id, "window", window_start) do update
        set used = usage_counters.used + least(${want}::bigint, ${limit}::bigint - usage_counters.used),
            last_grant = least(${want}::bigint, ${limit}::bigint - usage_counters.used)
        where usage_counters.used < ${limit}::bigint
      returning used, last_grant
    ), l as (
      insert into usage_leases (replica_id, user_id, "window", window_start, granted, served)
      select ${replica}, ${w.userId}, ${w.kind}, ${new Date(w.start)}, last_grant, 0 from g
      on conflict (replica_id, user_id, "window", window_start) do update set granted = usage_leases.granted + excluded.granted
    )
    select (select count(*) from me)::int as alive, (select used from g) as used, (select last_grant from g) as last_grant`.execute(db);
  const row = r.rows[0]!;
  return { alive: Number(row.alive) === 1, used: row.used === null ? null : Number(row.used), granted: Number(row.last_grant ?? 0) };
}

/** `n` unused tokens back: off the replica's lease and off the counter. Resolves to `used` after, if returned. */
export async function returnBlock(db: Kysely<GatewayDB>, replica: string, w: Window, n: number): Promise<number | undefined> {
  // The counter's row is locked first, as a lease locks it (counter, then lease): in the other order a give-back
  // and a lease of the same window (a tier change gives back while the next request leases) deadlocked.
  const r = await sql<{ used: number }>`
    with c as (
      select 1 from usage_counters
      where user_id = ${w.userId} and "window" = ${w.kind} and window_start = ${new Date(w.start)}
      for update
    ), l as (
      update usage_leases set granted = granted - ${n}::bigint
      where replica_id = ${replica} and user_id = ${w.userId} and "window" = ${w.kind} and window_start = ${new Date(w.start)}
        and exists (select 1 from c)
      returning 1
    )
    update usage_counters set used = greatest(used - ${n}::bigint, 0)
    where user_id = ${w.userId} and "window" = ${w.kind} and window_start = ${new Date(w.start)} and exists (select 1 from l)
    returning used`.execute(db);
  return r.rows[0] ? Number(r.rows[0].used) : undefined;
}

/** The replica's heartbeat, dropping its rows of windows long over. false: its row is gone (reclaimed). */
export async function beat(db: Kysely<GatewayDB>, replica: string, now: number): Promise<boolean> {
  const r = await sql<{ alive: number }>`
    with hb as (
      update usage_replicas set heartbeat_at = now() where replica_id = ${replica} returning 1
    ), old as (
      delete from usage_leases where replica_id = ${replica} and exists (select 1 from hb)
        and (("window" = 'minute' and window_start < ${new Date(now - 2 * MINUTE_MS)}) or ("window" = 'day' and window_start < ${new Date(now - 2 * DAY_MS)}))
    )
    select count(*)::int as alive from hb`.execute(db);
  return Number(r.rows[0]?.alive) === 1;
}

/** The replica's row, made at its first lease (and again after it was reclaimed). */
export async function register(db: Kysely<GatewayDB>, replica: string): Promise<void> {
  await sql`insert into usage_replicas (replica_id, heartbeat_at) values (${replica}, now())`.execute(db);
}
