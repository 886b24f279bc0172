import type { contracts, Logger } from '@agenthost/shared';
import { describe } from '../docker/call.ts';
import type { InstanceRepo } from './instance-repo.ts';
import type { OpLocks } from './locks.ts';
import { singleFlight } from './single-flight.ts';
import type { Depth, Sleeper } from './sleep.ts';

export interface IdleSleepDeps {
  repo: InstanceRepo;
  locks: OpLocks;
  sleeper: Pick<Sleeper, 'sleepLocked' | 'swapOut' | 'freezes'>;
  /** Docker answers (no instance is put to sleep while it does not). */
  dockerUp: () => boolean;
  /** SLEEP_AFTER_IDLE_SECONDS_JSON (light sleep) and DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON: per tier, 0 or absent = never. */
  idleSeconds: Partial<Record<contracts.TierName, number>>;
  deepIdleSeconds: Partial<Record<contracts.TierName, number>>;
  intervalSeconds: number;
  log: Logger;
}

/**
 * Idle sleep. Edges report the instances that had traffic (provisioner.v1.routes.activity: traffic_at), and every
 * SLEEP_CHECK_INTERVAL_SECONDS an instance of a tier that sleeps, with neither traffic nor a start within its idle
 * time (becoming ready counts as traffic), is put to sleep under its operation lock (re-read there, so a wake, stop
 * or delete in between wins): lightly (frozen) after the tier's light time, deeply (stopped) after its deep time,
 * from running or from a light sleep. Every replica may run the pass: the lock and the re-read make a second one a
 * no-op. Without an edge reporting, an instance sleeps its idle time after it became ready; its next request through
 * the edge wakes it.
 */
export class IdleSleep {
  private readonly deps: IdleSleepDeps;
  private timer: NodeJS.Timeout | undefined;

  constructor(deps: IdleSleepDeps) {
    this.deps = deps;
  }

  /** Traffic seen by an edge now: the instances' idle time starts again. Returns how many rows it touched. */
  async record(ids: string[]): Promise<number> {
    if (ids.length === 0) return 0;
    return this.deps.repo.recordTraffic(ids);
  }

  start(): void {
    if (![...Object.values(this.deps.idleSeconds), ...Object.values(this.deps.deepIdleSeconds)].some((s) => (s ?? 0) > 0)) return;
    this.timer = setInterval(() => void this.trigger(), Math.max(1, this.deps.intervalSeconds) * 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  readonly trigger = singleFlight(
    () => this.pass(),
    (err) => {
      this.deps.log.warn({ err: describe(err) }, 'idle sleep pass failed; will retry');
      return 0;
    },
  );

  /**
   * The tier's light and deep times as they apply here: without freezing (swarm) the first of the two stops the
   * container; a light time no shorter than the deep one is the deep one.
   */
  times(tier: contracts.TierName): Record<Depth, number> {
    const light = this.deps.idleSeconds[tier] ?? 0;
    const deep = this.deps.deepIdleSeconds[tier] ?? 0;
    if (!this.deps.sleeper.freezes) return { light: 0, deep: light && deep ? Math.min(light, deep) : light || deep };
    if (light && deep && light >= deep) return { light: 0, deep };
    return { light, deep };
  }

  /** Puts every idle instance to sleep, deep ones first (an instance past both times goes straight to deep); returns how many. */
  private async pass(): Promise<number> {
    if (!this.deps.dockerUp()) return 0;
    let slept = 0;
    const tiers = new Set([...Object.keys(this.deps.idleSeconds), ...Object.keys(this.deps.deepIdleSeconds)] as contracts.TierName[]);
    for (const tier of tiers) {
      const times = this.times(tier);
      for (const depth of ['deep', 'light'] as const) {
        const seconds = times[depth];
        if (!seconds) continue;
        for (const { id } of await this.deps.repo.idle(tier, seconds, depth)) {
          const t0 = performance.now();
          const done = await this.deps.locks.tryWith(id, async () => {
            const [row] = await this.deps.repo.idle(tier, seconds, depth, id);
            if (!row) return false;
            await this.deps.sleeper.sleepLocked(row, depth);
            return true;
          });
          if (done) {
            // Outside the lock, so that a wake waits for one step of it at most.
            if (depth === 'light') await this.deps.sleeper.swapOut(id);
            slept++;
            const took_ms = Math.round(performance.now() - t0);
            this.deps.log.info({ instance_id: id, tier, idle_seconds: seconds, depth, took_ms }, 'idle instance put to sleep');
          }
        }
      }
    }
    return slept;
  }
}
