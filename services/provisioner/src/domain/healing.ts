import { observeRestart } from '../metrics.ts';
import { constants } from 'node:os';
import { backoffMs, type contracts, type Logger } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow } from '../db/schema.ts';
import { describe } from '../docker/call.ts';
import type { ContainerEvents } from '../docker/events.ts';
import { LABEL_INSTANCE } from '../docker/spec.ts';
import type { InstanceRepo } from './instance-repo.ts';
import type { OpLocks } from './locks.ts';
import type { BootRetry, Readiness } from './readiness.ts';
import type { Credentials, InstanceRuntime, RuntimeState } from './runtime.ts';

type Policy = Pick<
  ProvisionerConfig,
  'RESTART_BACKOFF_INITIAL_MS' | 'RESTART_BACKOFF_MAX_SECONDS' | 'RESTART_STABLE_SECONDS' | 'RESTART_FAILED_AFTER' | 'READY_TIMEOUT_SECONDS' | 'BOOT_RETRIES'
>;

export interface HealingDeps {
  repo: InstanceRepo;
  runtime: InstanceRuntime;
  locks: OpLocks;
  readiness: Readiness;
  log: Logger;
  policy: Policy;
  issueCredentials(userId: string, instanceId: string): Promise<Credentials>;
}

/** How long a SIGTERM through the engine marks the next death as a stop (docker stop's timeout is far shorter). */
const STOP_MEMORY_MS = 120_000;

const STOPPED_OUTSIDE = 'The agent was stopped from outside agenthost (docker stop); start the instance again (POST /instance/start)';

/** The wait before the restart that follows the streak-th crash in a row: doubling from the initial delay, capped. */
export function restartDelayMs(streak: number, policy: Pick<Policy, 'RESTART_BACKOFF_INITIAL_MS' | 'RESTART_BACKOFF_MAX_SECONDS'>): number {
  return backoffMs(streak, { initialMs: policy.RESTART_BACKOFF_INITIAL_MS, maxMs: policy.RESTART_BACKOFF_MAX_SECONDS * 1000 });
}

/** What kind of exit it was, for machines (status, events): the OOM killer, a signal (exit code > 128), its own exit. */
export function exitKind(s: Pick<RuntimeState, 'exitCode' | 'oomKilled'>): 'oom_killed' | 'signal' | 'exit' {
  if (s.oomKilled) return 'oom_killed';
  return (s.exitCode ?? 0) > 128 ? 'signal' : 'exit';
}

/** Why an agent stopped on its own, in words a user can act on. */
export function exitReason(s: Pick<RuntimeState, 'exitCode' | 'oomKilled'>, memoryMb: number): string {
  if (s.oomKilled) return `killed: out of memory (limit ${memoryMb} MiB)`;
  const code = s.exitCode ?? 0;
  const signal = code > 128 ? Object.entries(constants.signals).find(([, n]) => n === code - 128)?.[0] : undefined;
  return signal ? `killed by ${signal} (exit code ${code})` : `exited with code ${code}`;
}

/**
 * Self-healing of the docker driver. A container the engine reports dead (its `die` event, or the reconciler
 * finding it exited) whose instance was running, or was being restarted after a crash, is started again after a
 * delay that doubles with each crash in a row (RESTART_BACKOFF_INITIAL_MS … RESTART_BACKOFF_MAX_SECONDS). It never
 * gives up: the RESTART_FAILED_AFTER-th crash in a row turns the instance `failed` with the reason and the time of
 * the next attempt, and the restarts go on at the capped delay; once the agent is ready again the instance is
 * `running`. Each crash changes the status or the generation, so the status outbox publishes it as an
 * events.instance.status event with its exit reason, the restarts so far and the next restart. The pending restart is kept in the row (step
 * `backoff`, next_restart_at), so any replica's reconciler carries it out after a provisioner restart.
 *
 * An agent that exits before it was ever ready after a create, restart or start is not healed forever: it is booted
 * again at most BOOT_RETRIES times (retryBoot, called by the readiness watcher), since a boot can fail for a moment's
 * reason (a real OpenClaw exits 78 when its state worker is not ready within 5 s on a starved host), and then the
 * instance fails with the last exit: a broken image or configuration fails every boot, and restarting it for ever
 * would only hide the cause. Nor is one stopped through the engine with SIGTERM (`docker stop` by an operator): it
 * turns failed, as a stop that Docker's own restart policy would not have undone either.
 */
export class SelfHealing {
  private readonly deps: HealingDeps;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Containers sent SIGTERM through the engine, and when. */
  private readonly terminated = new Map<string, number>();
  private stopped = false;

  constructor(deps: HealingDeps) {
    this.deps = deps;
  }

  listen(events: ContainerEvents): void {
    // SIGTERM through the engine is a stop (`docker stop`, `docker kill --signal TERM`): an operator's, since the
    // provisioner's own stops mark the row first. Remembered per container until its death is handled.
    events.on('kill', (e) => {
      if (['15', 'SIGTERM', 'TERM'].includes(e.attrs.signal ?? '')) this.terminated.set(e.id, Date.now());
    });
    events.on('die', (e) => {
      const id = e.attrs[LABEL_INSTANCE];
      const termAt = this.terminated.get(e.id);
      this.terminated.delete(e.id);
      for (const [c, at] of this.terminated) if (Date.now() - at > STOP_MEMORY_MS) this.terminated.delete(c);
      if (!id) return;
      const handled = this.ownStop(id).then((own) =>
        own ? false : termAt !== undefined && Date.now() - termAt < STOP_MEMORY_MS ? this.stoppedOutside(id, e.id) : this.crashed(id, e.id),
      );
      void handled.catch((err) => this.deps.log.warn({ instance_id: id, err: describe(err) }, 'could not handle a crash; the reconciler will'));
    });
  }

  /**
   * The provisioner is stopping this instance itself (a stop, a sleep or a delete, under the instance's lock, which
   * may be held as long as the agent takes to exit): its death is that operation's, nothing to wait for or handle.
   */
  private async ownStop(instanceId: string): Promise<boolean> {
    const row = await this.deps.repo.stepOf(instanceId);
    return !row || row.deleting_at !== null || row.step === 'stopping' || row.step === 'sleeping' || row.step === 'deleting';
  }

  private async stoppedOutside(instanceId: string, containerId: string): Promise<boolean> {
    const { repo, locks } = this.deps;
    const done = await locks.with(instanceId, async () => {
      const row = await repo.byId(instanceId);
      if (!row || !SelfHealing.heals(row) || (row.container_id && containerId !== row.container_id)) return false;
      return repo.markStoppedOutside(instanceId, row.generation, STOPPED_OUTSIDE);
    });
    if (done) this.deps.log.warn({ instance_id: instanceId }, 'agent stopped from outside agenthost: not restarted');
    return done;
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  /**
   * Whether a crash of this instance's agent is healed: it was running, or is coming back from a crash (a stop or a
   * failure the provisioner decides, e.g. the storage quota, ends the series: crash_streak 0).
   */
  static heals(row: InstanceRow): boolean {
    if (row.deleting_at || row.step !== 'done') return false;
    return row.status === 'running' || ((row.status === 'provisioning' || row.status === 'failed') && row.crash_streak > 0);
  }

  /**
   * The reconciler's look at an instance this healer owns: a dead container the event stream did not report is
   * handled as a crash, a pending restart is scheduled (again, after a provisioner restart). True when it acted.
   */
  async reconcile(row: InstanceRow): Promise<boolean> {
    if (row.step === 'backoff' && !row.deleting_at) {
      if (!this.timers.has(row.id)) this.schedule(row.id, row.next_restart_at ?? new Date());
      return false;
    }
    if (!SelfHealing.heals(row)) return false;
    const s = await this.deps.runtime.inspect(row.id);
    if (s.state === 'exited') return this.crashed(row.id);
    if (row.status === 'failed' && s.state === 'running' && !this.deps.readiness.isWatching(row.id, row.generation)) {
      // Restarted while it kept crashing, and its watcher died with its provisioner: watched again, so it turns
      // running once ready (a provisioning one is resumed by the reconciler like any other).
      const now = new Date();
      this.deps.readiness.watch({
        id: row.id,
        generation: row.generation,
        port: row.port,
        host: this.deps.runtime.probeHost(row),
        deadline: row.ready_deadline ? new Date(row.ready_deadline) : new Date(now.getTime() + this.deps.policy.READY_TIMEOUT_SECONDS * 1000),
        startedAt: row.started_at ? new Date(row.started_at) : now,
        from: 'failed',
        healed: true,
      });
    }
    return false;
  }

  /** The agent of an instance died: record it and schedule its restart. True when it was a crash to heal. */
  async crashed(instanceId: string, containerId?: string): Promise<boolean> {
    const { repo, locks, runtime, policy } = this.deps;
    // Waits for a short operation (our own restart) to finish: its start may be what just crashed.
    const r = await locks.with(instanceId, async () => {
      const row = await repo.byId(instanceId);
      if (!row || !SelfHealing.heals(row)) return undefined;
      // A late event of a container that a restart has since replaced.
      if (containerId && row.container_id && containerId !== row.container_id) return undefined;
      const s = await runtime.inspect(instanceId);
      if (s.state !== 'exited') return undefined;
      const now = new Date();
      const exitedAt = s.finishedAt ? new Date(s.finishedAt) : now;
      const ranMs = row.started_at ? exitedAt.getTime() - new Date(row.started_at).getTime() : Infinity;
      const streak = ranMs >= policy.RESTART_STABLE_SECONDS * 1000 ? 1 : row.crash_streak + 1;
      const next = new Date(now.getTime() + restartDelayMs(streak, policy));
      const reason = exitReason(s, row.memory_mb);
      const failing = streak >= policy.RESTART_FAILED_AFTER;
      const failure = failing ? `The agent keeps crashing: ${streak} times in a row, last ${reason}; it is restarted again at ${next.toISOString()}` : null;
      const updated = await repo.markCrashed(instanceId, row.generation, {
        failing,
        streak,
        reason,
        kind: exitKind(s),
        oomKilled: s.oomKilled === true,
        exitedAt,
        next,
        failure,
        now,
      });
      return updated && { row: updated, reason };
    });
    if (!r) return false;
    const { row, reason } = r;
    this.deps.log.warn(
      { instance_id: row.id, exit_reason: reason, crash_streak: row.crash_streak, next_restart_at: row.next_restart_at },
      'agent crashed; restart scheduled',
    );
    this.schedule(row.id, new Date(row.next_restart_at!));
    return true;
  }

  /**
   * The agent of a start exited before it was ever ready: booted again after a doubling delay, its exit recorded and
   * published, unless it has used its BOOT_RETRIES. An upgrade's boot is not retried: its rollback is the retry.
   */
  async retryBoot(instanceId: string, generation: number): Promise<BootRetry> {
    const { repo, locks, runtime, policy } = this.deps;
    let boots = 1;
    const row = await locks.with(instanceId, async () => {
      const r = await repo.byId(instanceId);
      boots = (r?.boot_retries ?? 0) + 1;
      if (!r || r.generation !== generation || r.upgrade_state === 'upgrading' || r.boot_retries >= policy.BOOT_RETRIES) return undefined;
      const s = await runtime.inspect(instanceId);
      if (s.state !== 'exited') return undefined;
      const now = new Date();
      return repo.markBootRetry(instanceId, generation, {
        reason: exitReason(s, r.memory_mb),
        kind: exitKind(s),
        oomKilled: s.oomKilled === true,
        exitedAt: s.finishedAt ? new Date(s.finishedAt) : now,
        next: new Date(now.getTime() + restartDelayMs(r.boot_retries + 1, policy)),
        now,
      });
    });
    if (!row) return { retried: false, boots };
    this.deps.log.warn(
      { instance_id: row.id, exit_reason: row.last_exit_reason, boot_retries: row.boot_retries, next_restart_at: row.next_restart_at },
      'agent exited before it was ready; booting it again',
    );
    this.schedule(row.id, new Date(row.next_restart_at!));
    return { retried: true, boots };
  }

  private schedule(id: string, at: Date): void {
    if (this.stopped) return;
    clearTimeout(this.timers.get(id));
    const t = setTimeout(
      () => {
        this.timers.delete(id);
        void this.restart(id).catch((err) =>
          this.deps.log.warn({ instance_id: id, err: describe(err) }, 'restart after a crash failed; the reconciler retries it'),
        );
      },
      Math.max(0, at.getTime() - Date.now()),
    );
    t.unref();
    this.timers.set(id, t);
  }

  /** Start the crashed agent again (same container, volume and token; fresh credentials) and watch it get ready. */
  private async restart(id: string): Promise<void> {
    const { repo, locks, runtime, readiness, policy } = this.deps;
    await locks.tryWith(id, async () => {
      const row = await repo.byId(id);
      if (row?.step !== 'backoff' || row.deleting_at) return;
      if (row.next_restart_at && new Date(row.next_restart_at).getTime() > Date.now()) return this.schedule(id, new Date(row.next_restart_at));
      const creds = await this.deps.issueCredentials(row.user_id, row.id);
      await readiness.staggered(async () => {
        const now = new Date();
        const deadline = new Date(now.getTime() + policy.READY_TIMEOUT_SECONDS * 1000);
        const started = await repo.markRestarted(id, row.generation, now, deadline);
        if (!started) return;
        await runtime.start(id, creds);
        observeRestart();
        this.deps.log.info({ instance_id: id, restarts: started.restarts }, 'crashed agent started again');
        readiness.watch({
          id,
          generation: started.generation,
          port: started.port,
          host: runtime.probeHost(started),
          deadline,
          startedAt: now,
          from: started.status === 'failed' ? 'failed' : 'provisioning',
          // A boot retried (crash_streak 0) is still the watcher's: its next exit may fail the instance.
          healed: started.crash_streak > 0,
        });
      });
    });
  }
}

type CrashFields = 'restarts' | 'oom_kills' | 'last_exit_reason' | 'last_exit_kind' | 'last_exit_at' | 'next_restart_at';

/** The self-healing fields of the status view. */
export function crashView(row: InstanceRow): Pick<contracts.provisioner.InstanceView, CrashFields> {
  return {
    restarts: row.restarts,
    oom_kills: row.oom_kills,
    ...(row.last_exit_reason ? { last_exit_reason: row.last_exit_reason } : {}),
    ...(row.last_exit_kind ? { last_exit_kind: row.last_exit_kind } : {}),
    ...(row.last_exit_at ? { last_exit_at: new Date(row.last_exit_at).toISOString() } : {}),
    ...(row.next_restart_at ? { next_restart_at: new Date(row.next_restart_at).toISOString() } : {}),
  };
}
