import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { AppError, type Logger } from '@agenthost/shared';
import type { InstanceRow } from '../db/schema.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { describe } from '../docker/call.ts';
import type { LocalImages } from './images.ts';
import type { InstanceRepo } from './instance-repo.ts';
import type { InstanceLifecycle } from './lifecycle.ts';
import type { OpLocks } from './locks.ts';
import type { InstanceRuntime } from './runtime.ts';
import type { StatsSampler } from './stats.ts';

export interface SleepDeps {
  repo: InstanceRepo;
  runtime: InstanceRuntime;
  engine: DockerEngine;
  images: LocalImages;
  locks: OpLocks;
  lifecycle: Pick<InstanceLifecycle, 'recreateLocked'>;
  stats: StatsSampler;
  log: Logger;
  /** A light sleep keeps this much memory resident and pushes the rest out to swap; undefined: it only freezes. */
  residentMb: number | undefined;
  pause(point: string): Promise<void>;
}

export type Depth = 'light' | 'deep';

const frozen = (r: InstanceRow) => r.status === 'sleeping' && (r.sleep_depth === 'frozen' || r.sleep_depth === 'swapped');

/**
 * Sleep and wake of idle instances, in two depths (docs/decisions/0052-two-sleep-depths.md). A light sleep freezes
 * the agent (and pushes its memory out to swap where the host's swap is safe for it); its wake resumes the same
 * processes in a fraction of a second, with their conversations, keys, sockets and token. A deep sleep stops the
 * container; its wake boots the agent, as a start does. A runtime without freezing (swarm) only sleeps deeply.
 */
export class Sleeper {
  private readonly deps: SleepDeps;

  constructor(deps: SleepDeps) {
    this.deps = deps;
  }

  /** Whether light sleep is possible with this runtime. */
  get freezes(): boolean {
    return Boolean(this.deps.runtime.freeze && this.deps.runtime.thaw);
  }

  /** Under the lock, an idle instance (running, or lightly asleep for a deep sleep): step sleeping → frozen or stopped. */
  async sleepLocked(row: InstanceRow, depth: Depth): Promise<void> {
    const { repo, runtime } = this.deps;
    await repo.markStopping(row.id, 'sleeping');
    await this.deps.pause('sleeping');
    if (depth === 'light' && runtime.freeze && row.status === 'running') {
      // The edges hear first (its status event) that it sleeps, and hold its owner's requests for a wake and answer
      // anyone else's themselves; only then is it frozen, so no request is sent on into a frozen agent.
      // Its memory goes out to swap after the lock is let go (swapOut): `swapped` from the start, as the doctor allows
      // any memory limit up to its tier's for it.
      const swaps = Boolean(runtime.swapOut && this.deps.residentMb && this.deps.residentMb < row.memory_mb);
      await repo.markAsleep(row.id, swaps ? 'swapped' : 'frozen');
      await sleep(EDGE_HEARS_MS);
      try {
        await runtime.freeze(row.id);
      } catch (err) {
        // It stays awake (the next pass tries again); if Docker cannot even resume it, the reconciler sees it awake or ended.
        await this.resume(row, true);
        throw err;
      }
      // A request an edge sent on before it heard waits inside the frozen agent: it is served, and the agent sleeps
      // again at the next pass (its idle time is not renewed: a stranger's request must not keep it awake).
      if (await this.wakeAwaited(row)) return;
    } else if (!(await this.checkpointLocked(row))) {
      await runtime.stop(row.id);
      await this.deps.pause('slept');
      await repo.markStopped(row.id, undefined, true);
    }
    this.deps.stats.forget(row.id);
  }

  /**
   * After a light sleep, outside its lock: push the frozen agent's memory out to swap, a step at a time, each step
   * under the lock and the lock let go between steps. A wake (which takes the lock) waits for one step at most, not
   * for the whole push, and ends it: the steps stop at an instance that is not asleep `swapped` any more.
   */
  async swapOut(id: string): Promise<void> {
    const { runtime, repo, locks, residentMb } = this.deps;
    if (!residentMb || !runtime.swapOut) return;
    const step = () =>
      locks.tryWith(id, async () => {
        const row = await repo.byId(id);
        if (!row || row.deleting_at || row.status !== 'sleeping' || row.sleep_depth !== 'swapped' || row.step !== 'done') return false;
        const r = await runtime.swapOut!(id, { memoryMb: row.memory_mb, residentMb, stepMb: SWAP_STEP_MB });
        if (r === 'refused') await repo.markAsleep(id, 'frozen');
        return r === 'more';
      });
    try {
      // Between steps, longer than a lock waiter's poll (locks.ts: every 100 ms), so a waiting wake takes the lock.
      while (await step()) await sleep(SWAP_STEP_GAP_MS);
    } catch (err) {
      // It sleeps frozen with what it still holds; its wake sets its tier's limit back as for any other.
      this.deps.log.warn({ instance_id: id, err: describe(err) }, 'the sleeping agent’s memory could not all go out to swap');
    }
  }

  /**
   * Under the lock, the deep sleep where the runtime can checkpoint (docs/decisions/0049-...): the agent's processes
   * are dumped to an image sealed to this instance, container and checkpoint, and its container runs on with
   * hold-init alone. False when it cannot (a container made before checkpointing was on) or the dump failed: the
   * caller stops it instead, as a deep sleep without checkpoints does.
   */
  private async checkpointLocked(row: InstanceRow): Promise<boolean> {
    const { repo, runtime, log } = this.deps;
    const checkpoints = runtime.checkpoints;
    if (!checkpoints || !(await checkpoints.can(row.id).catch(() => false))) return false;
    const checkpointId = randomUUID();
    // CRIU dumps running processes: a lightly sleeping agent is resumed first (the edges hold its requests meanwhile).
    if (frozen(row)) await runtime.thaw!(row.id, row.memory_mb);
    // As for a freeze, the edges hear first that it sleeps, so no request is sent on into an agent being dumped.
    await repo.markAsleep(row.id, 'checkpointed', checkpointId, 'sleeping');
    if (row.status === 'running') await sleep(EDGE_HEARS_MS);
    try {
      const took = await checkpoints.checkpoint(row.id, checkpointId);
      await this.deps.pause('checkpointed');
      await repo.markAsleep(row.id, 'checkpointed', checkpointId);
      log.info({ instance_id: row.id, ...took }, 'instance checkpointed');
      return true;
    } catch (err) {
      if (err instanceof AppError && err.code === 'DOCKER_UNAVAILABLE') throw err;
      log.warn({ instance_id: row.id, err: describe(err) }, 'the agent could not be checkpointed: it is stopped instead');
      return false;
    }
  }

  /**
   * The edge holds a request to a sleeping instance: resume it when it is frozen, else start it as a start would (same
   * volume, port and token, fresh credentials). A frozen agent that cannot be resumed boots instead, and its status
   * event says why (wake_warning); only if that boot fails does the instance fail. Idempotent: an instance that is
   * not asleep is only reported, so every held request may ask.
   */
  async wake(id: string): Promise<{ instance_id: string; status: InstanceRow['status'] }> {
    // Going to sleep (being frozen or stopped) counts as asleep: the wake waits for the sleep's lock.
    const asleep = (r: InstanceRow) => r.status === 'sleeping' || r.step === 'sleeping';
    const seen = await this.deps.repo.byId(id);
    if (!seen || seen.deleting_at) throw new AppError('INSTANCE_NOT_FOUND');
    if (!asleep(seen)) return { instance_id: id, status: seen.status };
    this.deps.engine.assertUp();
    return this.deps.locks.with(
      id,
      async () => {
        const row = await this.deps.repo.byId(id);
        if (!row || row.deleting_at) throw new AppError('INSTANCE_NOT_FOUND');
        if (!asleep(row)) return { instance_id: id, status: row.status };
        let wakeWarning: string | undefined;
        if (row.sleep_depth === 'checkpointed') {
          const why = await this.restoreLocked(row);
          if (typeof why !== 'string') {
            this.deps.log.info({ instance_id: id, depth: row.sleep_depth, ...why }, 'instance restored from its checkpoint by a request');
            return { instance_id: id, status: 'running' as const };
          }
          wakeWarning = `The sleeping agent could not be restored from its checkpoint (${why}); it boots instead`;
          this.deps.log.warn({ instance_id: id, reason: why }, 'checkpointed instance could not be restored; booting it');
        } else if (frozen(row)) {
          const why = await this.thawLocked(row);
          if (!why) {
            this.deps.log.info({ instance_id: id, depth: row.sleep_depth }, 'instance resumed by a request');
            return { instance_id: id, status: 'running' as const };
          }
          wakeWarning = `The sleeping agent could not be resumed (${why}); it boots instead`;
          this.deps.log.warn({ instance_id: id, depth: row.sleep_depth, reason: why }, 'frozen instance could not be resumed; booting it');
        }
        await this.deps.images.assertPresent(row.image_digest ?? row.image);
        await this.deps.lifecycle.recreateLocked(row, undefined, wakeWarning ? { wakeWarning } : {});
        this.deps.log.info({ instance_id: id }, 'instance woken by a request');
        return { instance_id: id, status: 'provisioning' as const };
      },
      WAKE_LOCK_WAIT_MS,
    );
  }

  /**
   * The reconciler's look at an instance asleep in its container (frozen, or checkpointed: reconcileCheckpointed).
   * Frozen is as it should be. Resumed by someone else (an unpause by hand): it is awake. Gone or stopped (an engine
   * restart ends paused containers): it sleeps deeply now, and its next request boots it. Returns what changed, if any.
   */
  async reconcileAsleep(row: InstanceRow): Promise<'awake' | 'deep' | undefined> {
    if (row.status === 'sleeping' && row.sleep_depth === 'checkpointed') return this.reconcileCheckpointed(row);
    if (!frozen(row)) return undefined;
    const s = await this.deps.runtime.inspect(row.id);
    if (s.state === 'node_down') return undefined;
    if (s.state === 'running' && s.paused && !(await this.deps.runtime.awaited?.(row.id))) return undefined;
    return this.deps.locks.tryWith(row.id, async (): Promise<'awake' | 'deep' | undefined> => {
      const fresh = await this.deps.repo.byId(row.id);
      if (!fresh || fresh.deleting_at || !frozen(fresh)) return undefined;
      const now = await this.deps.runtime.inspect(row.id);
      if (now.state === 'running' && now.paused) return (await this.wakeAwaited(fresh)) ? 'awake' : undefined;
      if (now.state === 'running') {
        await this.resume(fresh, true);
        return 'awake';
      }
      await this.deps.repo.markStopped(row.id, undefined, true);
      return 'deep';
    });
  }

  /**
   * A checkpointed instance's container must run on (hold-init holds its place): one that ended (an engine restart,
   * a stop by hand) took the checkpoint's meaning with it, so its image goes and it sleeps stopped.
   */
  private async reconcileCheckpointed(row: InstanceRow): Promise<'deep' | undefined> {
    const { runtime, repo, locks } = this.deps;
    const ended = async () => !['running', 'node_down'].includes((await runtime.inspect(row.id)).state);
    if (!(await ended())) return undefined;
    return locks.tryWith(row.id, async (): Promise<'deep' | undefined> => {
      const fresh = await repo.byId(row.id);
      if (!fresh || fresh.deleting_at || fresh.step !== 'done' || fresh.sleep_depth !== 'checkpointed' || !(await ended())) return undefined;
      await runtime.checkpoints?.drop(row.id);
      await repo.markStopped(row.id, undefined, true);
      return 'deep';
    });
  }

  /** Under the lock: its tier's limits back, its processes resumed, the row running (`traffic`: its idle time starts now). */
  private async resume(row: InstanceRow, traffic: boolean): Promise<void> {
    await this.deps.runtime.thaw!(row.id, row.memory_mb);
    await this.deps.repo.markThawed(row.id, traffic);
  }

  /** Under the lock: resume a frozen agent that someone waits on (a request that reached it anyway); true if so. */
  private async wakeAwaited(row: InstanceRow): Promise<boolean> {
    if (!(await this.deps.runtime.awaited?.(row.id))) return false;
    await this.resume(row, false);
    this.deps.log.info({ instance_id: row.id }, 'a request reached the instance as it fell asleep: resumed');
    return true;
  }

  /** Under the lock: restore a checkpointed agent. Resolves to why it could not be, or to what the restore took. */
  private async restoreLocked(row: InstanceRow): Promise<string | Record<string, number>> {
    const checkpoints = this.deps.runtime.checkpoints;
    if (!checkpoints || !row.checkpoint_id) return 'checkpointing is off here now';
    let took: Record<string, number>;
    try {
      took = await checkpoints.restore(row.id, row.checkpoint_id, row.cpus);
    } catch (err) {
      if (err instanceof AppError && err.code === 'DOCKER_UNAVAILABLE') throw err;
      return describe(err);
    }
    await this.deps.repo.markThawed(row.id);
    return took;
  }

  /** Under the lock: resume a frozen agent. Resolves to why it could not be (undefined: it runs again). */
  private async thawLocked(row: InstanceRow): Promise<string | undefined> {
    try {
      await this.deps.runtime.thaw!(row.id, row.memory_mb);
      const s = await this.deps.runtime.inspect(row.id);
      if (s.state !== 'running' || s.paused) return `its container is ${s.state === 'running' ? 'still paused' : s.state}`;
    } catch (err) {
      if (err instanceof AppError && err.code === 'DOCKER_UNAVAILABLE') throw err;
      return describe(err);
    }
    await this.deps.repo.markThawed(row.id);
    return undefined;
  }
}

/** The most memory one step of a light sleep's push to swap moves: ~1-3 s of a wake's wait on a loaded 2-core host. */
const SWAP_STEP_MB = 128;
const SWAP_STEP_GAP_MS = 250;

/** How long the edges take to hear that an instance sleeps (its status event), at most, on a healthy bus. */
const EDGE_HEARS_MS = 500;

/**
 * A wake waits this long for the instance's lock: the edge holds the request meanwhile (its wake request waits 30 s),
 * and the sleep it may be waiting for lasts up to STOP_TIMEOUT_SECONDS (an agent that ignores SIGTERM).
 */
const WAKE_LOCK_WAIT_MS = 20_000;
