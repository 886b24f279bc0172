import { sql, type Kysely } from 'kysely';
import type { contracts, Logger } from '@agenthost/shared';
import type { ProvisionerDB } from '../db/schema.ts';
import { describe } from '../docker/engine.ts';
import type { InstanceLifecycle } from './lifecycle.ts';
import type { OpLocks } from './locks.ts';
import { singleFlight } from './single-flight.ts';

export interface IdleSleepDeps {
  db: Kysely<ProvisionerDB>;
  locks: OpLocks;
  lifecycle: Pick<InstanceLifecycle, 'sleepLocked'>;
  /** Docker answers (no instance is put to sleep while it does not). */
  dockerUp: () => boolean;
  /** SLEEP_AFTER_IDLE_SECONDS_JSON: per tier, 0 or absent = never. */
  idleSeconds: Partial<Record<contracts.TierName, number>>;
  intervalSeconds: number;
  log: Logger;
}

/**
 * Idle sleep. Edges report the instances that had traffic (provisioner.v1.routes.activity: traffic_at), and every
 * SLEEP_CHECK_INTERVAL_SECONDS a running instance of a tier that sleeps, with neither traffic nor a start within its
 * idle time, is put to sleep under its operation lock (re-read there, so a wake, stop or delete in between wins).
 * Every replica may run the pass: the lock and the re-read make a second one a no-op. Without an edge reporting, an
 * instance sleeps its idle time after it started; its next request through the edge wakes it.
 */
export class IdleSleep {
  private readonly d: IdleSleepDeps;
  private timer: NodeJS.Timeout | undefined;

  constructor(deps: IdleSleepDeps) {
    this.d = deps;
  }

  /** Traffic seen by an edge now: the instances' idle time starts again. Returns how many rows it touched. */
  async record(ids: string[]): Promise<number> {
    if (ids.length === 0) return 0;
    const r = await this.d.db
      .updateTable('instances')
      .set({ traffic_at: sql`now()` })
      .where('id', 'in', ids)
      .where('deleting_at', 'is', null)
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  start(): void {
    if (!Object.values(this.d.idleSeconds).some((s) => (s ?? 0) > 0)) return;
    this.timer = setInterval(() => void this.trigger(), Math.max(1, this.d.intervalSeconds) * 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  readonly trigger = singleFlight(
    () => this.pass(),
    (err) => {
      this.d.log.warn({ err: describe(err) }, 'idle sleep pass failed; will retry');
      return 0;
    },
  );

  /** Puts every idle instance to sleep; returns how many. */
  private async pass(): Promise<number> {
    if (!this.d.dockerUp()) return 0;
    let slept = 0;
    for (const [tier, seconds] of Object.entries(this.d.idleSeconds)) {
      if (!seconds) continue;
      for (const { id } of await this.idle(tier, seconds)) {
        const done = await this.d.locks.tryWith(id, async () => {
          const [row] = await this.idle(tier, seconds, id);
          if (!row) return false;
          await this.d.lifecycle.sleepLocked(row);
          return true;
        });
        if (done) {
          slept++;
          this.d.log.info({ instance_id: id, tier, idle_seconds: seconds }, 'idle instance put to sleep');
        }
      }
    }
    return slept;
  }

  /** Running instances of the tier with no traffic and no start within `seconds` (one of them when `id` is given). */
  private idle(tier: string, seconds: number, id?: string) {
    const since = sql<Date>`now() - make_interval(secs => ${seconds})`;
    let q = this.d.db
      .selectFrom('instances')
      .selectAll()
      .where('tier', '=', tier)
      .where('status', '=', 'running')
      .where('step', '=', 'done')
      .where('deleting_at', 'is', null)
      .where((eb) => eb.or([eb('upgrade_state', 'is', null), eb('upgrade_state', '!=', 'upgrading')]))
      .where((eb) => eb.or([eb('started_at', 'is', null), eb('started_at', '<', since)]))
      .where((eb) => eb.or([eb('traffic_at', 'is', null), eb('traffic_at', '<', since)]));
    if (id) q = q.where('id', '=', id);
    return q.limit(id ? 1 : 500).execute();
  }
}
