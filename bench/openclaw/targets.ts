// Issue 33's targets for the openclaw bench (run.ts), on this 2-core machine, and which the run met.
export const targets = { wake_p50_ms: 1500, wake_p99_ms: 3000, asleep_held_mb: 100, create_to_running_p50_ms: 3000, idle_rss_mb: 400 };

type Row = { wake_to_first_byte_ms: { p50: number; p99: number }; asleep_held_mb: number };
const DEPTHS = ['light_free', 'light_pro', 'deep_checkpointed_free', 'deep_checkpointed_pro'] as const;

export function targetsMet(m: { sleepRows: Record<(typeof DEPTHS)[number], Row>; createP50: number; pool: Record<string, { p50: number }>; idleRss: number }) {
  return Object.fromEntries([
    ...DEPTHS.flatMap((k) => [
      [`${k}_wake_p50`, m.sleepRows[k].wake_to_first_byte_ms.p50 <= targets.wake_p50_ms],
      [`${k}_wake_p99`, m.sleepRows[k].wake_to_first_byte_ms.p99 <= targets.wake_p99_ms],
      [`${k}_asleep_held`, m.sleepRows[k].asleep_held_mb <= targets.asleep_held_mb],
    ]),
    ['create', m.createP50 <= targets.create_to_running_p50_ms],
    // A create served by the warm pool (WARM_POOL_JSON), per tier.
    ...Object.entries(m.pool).map(([t, r]) => [`create_from_warm_pool_${t}`, r.p50 <= targets.create_to_running_p50_ms]),
    ['idle_rss', m.idleRss <= targets.idle_rss_mb],
  ]);
}
