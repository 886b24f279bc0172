import { observeReady } from '../metrics.ts';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@agenthost/shared';
import type { DockerEngine } from '../docker/engine.ts';
import type { InstanceRepo } from './instance-repo.ts';
import type { OpLocks } from './locks.ts';
import { NODE_DOWN, type InstanceRuntime } from './runtime.ts';

/** How long a failed agent's stop waits for another operation on its instance (a restart, a delete) to finish. */
const STOP_LOCK_WAIT_MS = 60_000;

export interface Watch {
  id: string;
  generation: number;
  port: number;
  /** The address its port is published on (the runtime's probeHost). */
  host: string;
  deadline: Date;
  startedAt: Date;
  /** The status it turns running from: failed for an agent restarted while it keeps crashing (healing.ts). */
  from?: 'provisioning' | 'failed';
  /** A restart after a crash: an exit is the healer's to handle (it restarts the agent again), not a failure. */
  healed?: boolean;
}

export interface ReadinessDeps {
  repo: InstanceRepo;
  engine: DockerEngine;
  runtime: InstanceRuntime;
  locks: OpLocks;
  log: Logger;
  readyTimeoutSeconds: number;
  defaultEstimateSeconds: number;
  /** STARTS_AT_ONCE and START_QUEUE_MAX_SECONDS (see staggered). */
  startsAtOnce?: number;
  startQueueMaxSeconds?: number;
}

/**
 * An agent that did not become ready: if this generation is an upgrade, it is rolled back (upgrades.ts) instead of
 * failed. True when it was an upgrade (rolled back, or overtaken by another operation).
 */
export type UpgradeFailed = (id: string, generation: number, reason: string) => Promise<boolean>;

/** An agent that exited before it was ready: booted again (healing.ts), or not, after this many boots in all. */
export type BootRetry = { retried: boolean; boots: number };
export type RetryBoot = (id: string, generation: number) => Promise<BootRetry>;

/**
 * provisioning → running only when the agent answers GET /readyz through its published port.
 * One watcher per (instance, generation); it polls quickly at first (a stand-in agent is ready in
 * well under a second) and more slowly later, checks the container every 2 s (an agent that exits
 * before it is ready fails the instance within seconds), and gives up at the row's ready_deadline. Watchers
 * keep their state in the row, so the reconciler of any replica resumes them after a restart.
 * Every transition is conditional on the generation, so a watcher of a replaced container can never
 * change the state of its successor.
 */
export class Readiness {
  private readonly deps: ReadinessDeps;
  private readonly watching = new Map<string, number>();
  /** Starts let through whose watch has not begun yet (see staggered). */
  private admitted = 0;
  private stopped = false;
  /** Exponential moving average of measured create → ready times (seconds). */
  private emaSeconds: number | undefined;
  private upgradeFailed: UpgradeFailed | undefined;
  private retryBoot: RetryBoot | undefined;

  constructor(deps: ReadinessDeps) {
    this.deps = deps;
  }

  /**
   * Upgrades register here (the composition root, once both exist): upgrades recreate through the lifecycle, which
   * starts its watches here, so neither can be handed the other when it is made.
   */
  onNotReady(upgradeFailed: UpgradeFailed): void {
    this.upgradeFailed = upgradeFailed;
  }

  /** The self-healing registers here: an agent that exits before it is ready may be booted again instead of failed. */
  onBootExit(retryBoot: RetryBoot): void {
    this.retryBoot = retryBoot;
  }

  /** Seconds a new instance is expected to take until ready. */
  estimateSeconds(): number {
    return Math.max(1, Math.ceil(this.emaSeconds ?? this.deps.defaultEstimateSeconds));
  }

  /**
   * Staggered starts: runs `start` (an agent's start and the beginning of its watch) once fewer than STARTS_AT_ONCE
   * agents of this provisioner are starting (started, not yet ready or failed), or after START_QUEUE_MAX_SECONDS, so a
   * burst of creates or a host's restart does not boot every agent at once (a start is an agent's peak of CPU and
   * memory). STARTS_AT_ONCE 0: no limit.
   */
  async staggered<T>(start: () => Promise<T>): Promise<T> {
    const limit = this.deps.startsAtOnce ?? 0;
    const until = Date.now() + (this.deps.startQueueMaxSeconds ?? 0) * 1000;
    while (limit > 0 && this.watching.size + this.admitted >= limit && Date.now() < until && !this.stopped) {
      await sleep(100);
    }
    this.admitted++;
    try {
      return await start();
    } finally {
      this.admitted--;
    }
  }

  isWatching(id: string, generation: number): boolean {
    return this.watching.get(id) === generation;
  }

  watch(w: Watch): void {
    if (this.stopped || this.watching.get(w.id) === w.generation) return;
    this.watching.set(w.id, w.generation);
    void this.loop(w)
      .catch((err) => this.deps.log.warn({ err, instance_id: w.id }, 'readiness watcher failed; the reconciler will resume it'))
      .finally(() => {
        if (this.watching.get(w.id) === w.generation) this.watching.delete(w.id);
      });
  }

  stop(): void {
    this.stopped = true;
  }

  private async loop(w: Watch): Promise<void> {
    const { repo, engine } = this.deps;
    const url = `http://${w.host.includes(':') ? `[${w.host}]` : w.host}:${w.port}/readyz`;
    // The container itself is looked at every 2 s (not at every probe), first 2 s after the start: during a
    // burst of creates the engine is busy starting containers and should not also answer a stream of inspects.
    let lastCheck = Date.now();
    while (!this.stopped && this.watching.get(w.id) === w.generation) {
      if (await probe(url)) {
        await this.clamp(w.id);
        const now = new Date();
        if (await this.settle(w, 'running', null, now)) {
          const seconds = (now.getTime() - w.startedAt.getTime()) / 1000;
          observeReady(seconds);
          this.emaSeconds = this.emaSeconds === undefined ? seconds : this.emaSeconds * 0.8 + seconds * 0.2;
          this.deps.log.info({ instance_id: w.id, ready_ms: Math.round(seconds * 1000) }, 'instance is running');
        }
        return;
      }
      if (Date.now() >= w.deadline.getTime()) {
        if (await this.fail(w, await this.timeoutReason(w))) {
          await this.stopFailed(w.id, w.generation).catch((err) =>
            this.deps.log.warn({ instance_id: w.id, err: String(err) }, 'could not stop the agent that never became ready'),
          );
        }
        return;
      }
      if (Date.now() - lastCheck >= 2000) {
        lastCheck = Date.now();
        const row = await repo.watchState(w.id);
        if (!row || row.generation !== w.generation || row.status !== (w.from ?? 'provisioning') || row.deleting_at) return;
        if (engine.available) {
          const s = await this.deps.runtime.inspect(w.id).catch(() => undefined); // engine trouble: keep waiting; the deadline still applies
          if (s?.state === 'exited') {
            if (!w.healed) await this.exitedBeforeReady(w, exitReason(s));
            return;
          }
          if (s?.state === 'node_down') {
            await this.fail(w, NODE_DOWN);
            return;
          }
          if (s?.state === 'missing') {
            await this.fail(w, 'The instance container disappeared');
            return;
          }
        }
      }
      const elapsed = Date.now() - w.startedAt.getTime();
      await sleep(elapsed < 3_000 ? 50 : elapsed < 10_000 ? 100 : elapsed < 60_000 ? 250 : 1000);
    }
  }

  /**
   * An agent booted on a burst of CPU goes back to its tier's share before it counts as running (so a crash in
   * between leaves a watcher that clamps it when it resumes). A failure is logged: it runs, with more CPU than it pays.
   */
  private async clamp(id: string): Promise<void> {
    const { runtime } = this.deps;
    if (!runtime.clampCpus) return;
    const cpus = await this.deps.repo.cpus(id);
    if (cpus === undefined) return;
    await runtime.clampCpus(id, cpus).catch((err) => this.deps.log.warn({ instance_id: id, err: String(err) }, 'could not set the agent to its CPU share'));
  }

  /**
   * Why an instance is not ready at its deadline. An agent that crashes at boot is restarted by the runtime a few
   * times; on a busy engine those restarts can outlast the deadline, and the crash is then the reason to report.
   */
  private async timeoutReason(w: Watch): Promise<string> {
    const s = this.deps.engine.available ? await this.deps.runtime.inspect(w.id).catch(() => undefined) : undefined;
    if (s?.state === 'exited' || (s?.state === 'starting' && s.exitCode)) return exitReason(s);
    return `The agent did not become ready within ${Math.round((w.deadline.getTime() - w.startedAt.getTime()) / 1000)} s`;
  }

  /**
   * Stop the container of a generation that never became ready, under the instance's operation lock. It waits for
   * the lock: every reconcile pass takes each instance's lock for a moment (its volume mount), and a stop skipped
   * then was never tried again, leaving the failed agent running.
   */
  private async stopFailed(id: string, generation: number): Promise<void> {
    await this.deps.locks.with(
      id,
      async () => {
        const row = await this.deps.repo.byId(id);
        // Only the failed container of this generation; a restart since then owns the instance.
        if (row && row.generation === generation && row.status === 'failed') {
          await this.deps.runtime.stop(id).catch(() => {});
        }
      },
      STOP_LOCK_WAIT_MS,
    );
  }

  /** Booted again while it has retries left (its new generation gets its own watch), failed after the last. */
  private async exitedBeforeReady(w: Watch, reason: string): Promise<void> {
    const r = w.from === 'failed' || !this.retryBoot ? undefined : await this.retryBoot(w.id, w.generation);
    if (r?.retried) return;
    await this.fail(w, r && r.boots > 1 ? `${reason}; it was booted ${r.boots} times` : reason);
  }

  private async fail(w: Watch, reason: string): Promise<boolean> {
    if (this.upgradeFailed && (await this.upgradeFailed(w.id, w.generation, reason))) return false;
    if (!(await this.settle(w, 'failed', reason, new Date()))) return false;
    this.deps.log.warn({ instance_id: w.id, reason }, 'instance failed');
    return true;
  }

  /** The watch ends in `status`, if the row is still the watched generation in the status it was watched from. */
  private settle(w: Watch, status: 'running' | 'failed', reason: string | null, now: Date): Promise<boolean> {
    return this.deps.repo.settleWatch({ id: w.id, generation: w.generation, from: w.from ?? 'provisioning' }, status, reason, now);
  }
}

function exitReason(s: { error?: string; exitCode?: number }): string {
  return s.error ?? `The agent exited with code ${s.exitCode} before it was ready`;
}

/** GET url → true on 200. node:http rather than fetch: cheaper, and dozens of watchers probe at once. */
function probe(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: 1500, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}
