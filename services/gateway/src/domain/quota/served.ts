import type { Kysely } from 'kysely';
import { runPrepared } from '@agenthost/shared';
import type { GatewayDB } from '../../db/schema.ts';

/**
 * The served counts of several windows in one statement, absolute values (a retry never counts twice), committed
 * without waiting for the disk. It runs for every few counted requests, so it is prepared once per connection
 * (runPrepared in shared/db.ts has the figures).
 */
export const SERVED_SQL = `
  update usage_leases l set served = greatest(l.served, v.served)
  from unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::bigint[]) as v(user_id, "window", window_start, served),
    (select set_config('synchronous_commit', 'off', true)) as async_commit
  where l.replica_id = $5 and l.user_id = v.user_id and l."window" = v."window" and l.window_start = v.window_start`;

/** Write each window's served count into this replica's lease row. */
export async function writeServed(
  db: Kysely<GatewayDB>,
  replicaId: string,
  items: { w: { userId: string; kind: string; start: number }; served: number }[],
): Promise<void> {
  await runPrepared(db, 'usage-served', SERVED_SQL, [
    items.map((i) => i.w.userId),
    items.map((i) => i.w.kind),
    items.map((i) => new Date(i.w.start).toISOString()),
    items.map((i) => i.served),
    replicaId,
  ]);
}
