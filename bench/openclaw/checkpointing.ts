// The openclaw bench's checkpointed deep sleep (run.ts step 6, docs/decisions/0049-...): the stack's provisioner
// replaced by one that checkpoints, and a sleep-depth row from its wakes (wake.ts).
import { randomBytes } from 'node:crypto';
import type { spawnService as SpawnService, Stack } from '../../packages/testkit/src/index.ts';
import { stats } from './creates.ts';
import type { wakeAtDepth } from './wake.ts';

type Service = Awaited<ReturnType<typeof SpawnService>>;

/**
 * The stack's provisioner stopped and replaced by one with a CHECKPOINT_KEY (the same database, NATS and edge), whose
 * deep sleep checkpoints. Free sleeps too, lightly and then deeply, as enterprise (pro's limits) does.
 */
export async function checkpointingProvisioner(o: {
  stack: Stack;
  spawnService: typeof SpawnService;
  checkpointDir: string;
  idleS: number;
  log: (msg: string) => void;
  /** More settings (the warm pool's step), and the service's label. */
  env?: Record<string, string>;
  label?: string;
}): Promise<Service> {
  await o.stack.services.get('provisioner')!.stop();
  const service = await o.spawnService('provisioner', {
    label: o.label ?? 'provisioner-checkpoint',
    env: {
      ...o.stack.envFor('provisioner'),
      SLEEP_CHECKPOINT: 'auto',
      CHECKPOINT_KEY: randomBytes(32).toString('base64'),
      CHECKPOINT_DIR: o.checkpointDir,
      SLEEP_AFTER_IDLE_SECONDS_JSON: JSON.stringify({ free: o.idleS, pro: 0, enterprise: o.idleS }),
      DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON: JSON.stringify({ free: o.idleS + 25, pro: 0, enterprise: o.idleS + 25 }),
      ...o.env,
    },
  });
  o.stack.services.set('provisioner', service);
  const on = service.lines().find((l) => l.includes('checkpointed sleep o'));
  o.log(`provisioner: ${on ? String((JSON.parse(on) as { msg?: string }).msg ?? on) : 'said nothing of checkpointing'}`);
  return service;
}

/** A `checkpointed` row of sleep_depths from its wakes, with its wake against the same run's restart floor. */
export function checkpointedRow(w: Awaited<ReturnType<typeof wakeAtDepth>>, restartP50: number) {
  const wakeStats = stats(w.wake);
  return {
    depth: 'checkpointed' as const,
    time_to_sleep_ms: stats(w.toSleep),
    asleep_held_mb: Math.round(Math.max(...w.held)),
    // The container's memory cgroup while asleep (the largest usage of the rounds) and its parts.
    asleep_cgroup_mb: w.parts.reduce((a, b) => (b.usage > a.usage ? b : a), w.parts[0] ?? { usage: NaN, anon: NaN, file: NaN, kernel: NaN }),
    image_mb: Math.max(...w.imageMb),
    wake_to_first_byte_ms: wakeStats,
    wake_ratio_to_restart_p50: Math.round((wakeStats.p50 / restartP50) * 1000) / 1000,
    wakes_restored: w.restored,
    wakes_booted_instead: w.booted,
  };
}
