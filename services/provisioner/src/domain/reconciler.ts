import type { Logger } from '@agenthost/shared';
import type { InstanceRow } from '../db/schema.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { describe } from '../docker/call.ts';
import type { QuotaVolumes } from '../docker/volumes.ts';
import { SelfHealing } from './healing.ts';
import type { InstanceRepo } from './instance-repo.ts';
import type { InstanceLifecycle } from './lifecycle.ts';
import type { OpLocks } from './locks.ts';
import type { NetworkGuard } from './network-guard.ts';
import { FollowUps } from './follow-ups.ts';
import type { Readiness } from './readiness.ts';
import { NODE_DOWN, type InstanceRuntime } from './runtime.ts';
import { singleFlight } from './single-flight.ts';
import type { Sleeper } from './sleep.ts';
import { INTERRUPTED, type InstanceUpgrades } from './upgrades.ts';

const CREATE_STEPS = new Set(['leased', 'container']);

const emptyReport = (): ReconcileReport => ({ orphans: 0, rolledBack: 0, deletesFinished: 0, failed: 0, watchersResumed: 0, crashes: 0 });

export interface ReconcileReport {
  /** Containers, volumes, volume files or swarm services of this scope without a row, removed. */
  orphans: number;
  rolledBack: number;
  deletesFinished: number;
  failed: number;
  watchersResumed: number;
  /** Crashed agents the event stream had not reported, now scheduled for a restart. */
  crashes: number;
}

/**
 * Makes Docker and the database agree, at start, every RECONCILE_INTERVAL_SECONDS and when Docker
 * comes back. Rows whose operation lock is held are being worked on and are skipped; a free lock on a
 * row in an intermediate step means the operation died with its process:
 *   create steps (leased, container) → undone (container, volume, keys purged, lease, row; no deleted event: never announced);
 *   deleting → finished;  stopping, sleeping → finished;  recreating → an upgrade? rolled back : container running? watched : failed;
 *   provisioning/done → its readiness watcher resumed;  running with a dead or missing container → failed.
 * Labelled containers and volumes of this scope without a row are orphans and removed. Docker is
 * listed BEFORE the rows are read: a row is always written before its Docker objects exist, so an
 * object seen without a row cannot belong to a create that is just starting.
 */
export class Reconciler {
  private readonly deps: {
    engine: DockerEngine;
    runtime: InstanceRuntime;
    locks: OpLocks;
    repo: InstanceRepo;
    lifecycle: InstanceLifecycle;
    sleeper: Sleeper;
    upgrades: InstanceUpgrades;
    readiness: Readiness;
    /** The docker driver's instance network and firewall, made sure of at every pass. */
    network?: NetworkGuard;
    /** The docker driver's self-healing: dead agents it owns are restarted, not failed. */
    healing?: SelfHealing;
    volumes: QuotaVolumes;
    scope: string;
    log: Logger;
    intervalSeconds: number;
    readyTimeoutSeconds: number;
    pause?: (point: string) => Promise<void>; // test-only fault points (faults.ts)
  };
  private timer: NodeJS.Timeout | undefined;
  private readonly followUps = new FollowUps(() => void this.trigger());

  constructor(deps: Reconciler['deps']) {
    this.deps = deps;
  }

  start(): void {
    this.timer = setInterval(() => void this.trigger(), this.deps.intervalSeconds * 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.followUps.stop();
  }

  /** A swarm node went or came back: a pass now, and a few more while its instances' tasks start (follow-ups.ts). */
  nodesChanged(): void {
    this.followUps.arm();
    void this.trigger();
  }

  /** Run a pass now (or right after the current one). */
  readonly trigger = singleFlight(
    () => this.pass(),
    (err): ReconcileReport | undefined => {
      this.deps.log.warn({ err: describe(err) }, 'reconcile pass failed; will retry');
      return undefined;
    },
  );

  async pass(): Promise<ReconcileReport> {
    const { engine, runtime, repo, locks, log } = this.deps;
    const report = emptyReport();
    engine.assertUp();
    await this.deps.network?.ensure();

    const objects = await runtime.managed();
    const volumeFiles = await this.deps.volumes.ids();
    const rows = await repo.all();
    const byId = new Map(rows.map((r) => [r.id, r]));

    const rowGone = async (id: string) => !(await repo.exists(id));
    // Containers before volumes (the runtime lists them in that order): a volume goes only once its container has.
    for (const obj of objects) {
      if (byId.has(obj.instanceId)) continue;
      const done = await locks.tryWith(obj.instanceId, async () => {
        if (!(await rowGone(obj.instanceId))) return false;
        await obj.remove();
        return true;
      });
      if (done) {
        report.orphans++;
        log.warn({ instance_id: obj.instanceId, kind: obj.kind }, `removed orphaned ${obj.kind}`);
      }
    }
    // After a reboot (or a lost mount) the size-limited volumes are mounted again before their containers start.
    for (const row of rows) {
      if (row.deleting_at || !volumeFiles.includes(row.id)) continue;
      await locks
        .tryWith(row.id, () => this.deps.volumes.mount(row.id))
        .catch((err) => log.error({ instance_id: row.id, err: describe(err) }, 'could not mount the instance volume'));
    }

    for (const row of rows) {
      try {
        await this.reconcileRow(row, report);
      } catch (err) {
        log.warn({ instance_id: row.id, err: describe(err) }, 'could not reconcile instance; will retry');
      }
    }
    const changed = Object.values(report).some((n) => n > 0);
    if (changed) log.info({ event: 'reconciled', ...report }, 'reconcile pass changed something');
    return report;
  }

  /**
   * Look at one instance now, by the same rules as a pass: the live view asks for it when it sees a running
   * instance's workload dead, so the row turns failed within moments instead of at the next pass.
   */
  async recheck(id: string): Promise<void> {
    try {
      this.deps.engine.assertUp();
      const row = await this.deps.repo.byId(id);
      if (row) await this.reconcileRow(row, emptyReport());
    } catch (err) {
      this.deps.log.warn({ instance_id: id, err: describe(err) }, 'could not reconcile instance; the next pass will');
    }
  }

  /** One row of a pass: finish or undo an interrupted operation, resume a watcher, or fail a dead instance. */
  private async reconcileRow(row: InstanceRow, report: ReconcileReport): Promise<void> {
    const { runtime, repo, lifecycle, sleeper, upgrades, readiness, log } = this.deps;
    if (row.deleting_at || row.step === 'deleting') {
      if (
        await this.repair(
          row,
          (r) => r.deleting_at !== null || r.step === 'deleting',
          (r) => lifecycle.finishDelete(r).then(() => {}),
        )
      ) {
        report.deletesFinished++;
        log.warn({ instance_id: row.id }, 'finished an interrupted delete');
      }
    } else if (CREATE_STEPS.has(row.step)) {
      if (
        await this.repair(
          row,
          (r) => CREATE_STEPS.has(r.step) && !r.deleting_at,
          (r) => lifecycle.undo(r),
        )
      ) {
        report.rolledBack++;
        log.warn({ instance_id: row.id, step: row.step }, 'rolled back an interrupted create');
      }
    } else if (this.deps.healing && (row.step === 'backoff' || SelfHealing.heals(row)) && (await this.deps.healing.reconcile(row))) {
      report.crashes++;
    } else if (row.step === 'stopping') {
      await this.repair(
        row,
        (r) => r.step === 'stopping',
        (r) => lifecycle.stopLocked(r),
      );
    } else if (row.step === 'sleeping') {
      await this.repair(
        row,
        (r) => r.step === 'sleeping',
        // Cut short on the way to sleep: it sleeps deeply (a stop is always safe to finish; its next request boots it).
        (r) => sleeper.sleepLocked(r, 'deep'),
      );
    } else if (row.status === 'sleeping' && row.step === 'done' && row.sleep_depth !== 'stopped') {
      const changed = await sleeper.reconcileAsleep(row);
      if (changed) log.warn({ instance_id: row.id, now: changed }, 'a sleeping instance was no longer as it slept (frozen or checkpointed)');
    } else if (row.step === 'recreating') {
      await this.repair(
        row,
        (r) => r.step === 'recreating',
        async (r) => {
          if (r.upgrade_state === 'upgrading') {
            // An upgrade cut short: back to the kept image (whichever container was left, it is replaced by name).
            await upgrades.rollbackLocked(r, INTERRUPTED);
            report.rolledBack++;
            return;
          }
          if ((await runtime.inspect(r.id)).state === 'running') {
            const now = new Date();
            const deadline = new Date(now.getTime() + this.deps.readyTimeoutSeconds * 1000);
            await repo.markRecreated(r.id, now, deadline);
            readiness.watch({ id: r.id, generation: r.generation, port: r.port, host: runtime.probeHost(r), deadline, startedAt: now });
            report.watchersResumed++;
          } else {
            await repo.markFailed(r.id, r.generation, 'A restart was interrupted; restart the instance again');
            report.failed++;
          }
        },
      );
    } else if (row.status === 'provisioning' && row.step === 'done') {
      if (!readiness.isWatching(row.id, row.generation)) {
        readiness.watch({
          healed: row.crash_streak > 0,
          id: row.id,
          generation: row.generation,
          port: row.port,
          host: runtime.probeHost(row),
          deadline: row.ready_deadline ?? new Date(Date.now() + 60_000),
          startedAt: row.started_at ?? row.updated_at,
        });
        report.watchersResumed++;
      }
    } else if (row.status === 'failed' && row.step === 'done' && row.failure_reason === NODE_DOWN) {
      // Its node is back and the swarm started its task again there: watched until ready, as after a start.
      await this.repair(
        row,
        (r) => r.status === 'failed' && r.failure_reason === NODE_DOWN,
        async (r) => {
          const s = await runtime.inspect(r.id);
          if (s.state === 'node_down') return; // nodesChanged runs a pass when it is back
          if (s.state === 'starting') return this.followUps.soon();
          if (s.state !== 'running') {
            if (runtime.nodeSettled && !(await runtime.nodeSettled(r))) return this.followUps.soon();
            // Its node is back but the swarm gave its task up (e.g. it failed its restarts while the node's
            // engine was coming back): started anew, with fresh credentials, as a restart would.
            log.info({ instance_id: r.id, state: s.state }, 'its node is back: instance restarted');
            await lifecycle.recreateLocked(r);
            report.watchersResumed++;
            return;
          }
          const now = new Date();
          const deadline = new Date(now.getTime() + this.deps.readyTimeoutSeconds * 1000);
          const generation = await repo.markNodeBack(r.id, now, deadline);
          readiness.watch({ id: r.id, generation, port: r.port, host: runtime.probeHost(r), deadline, startedAt: now });
          report.watchersResumed++;
          log.info({ instance_id: r.id }, 'its node is back: instance starting again');
        },
      );
    } else if (row.status === 'running' && row.step === 'done') {
      await this.deps.pause?.('reconcile-running');
      // A live one costs no lock; a dead one is failed under the lock, on the row as it is now (failed again from the
      // pass's old copy after a stop from outside had failed it, its reason changed: a second event).
      if (!(await this.deadReason(row.id))) return;
      await this.repair(
        row,
        (r) => r.status === 'running' && r.step === 'done' && r.generation === row.generation,
        async (r) => {
          const reason = await this.deadReason(r.id);
          if (!reason) return;
          await repo.markFailed(r.id, r.generation, reason);
          report.failed++;
          log.warn({ instance_id: r.id, reason }, 'running instance found dead');
        },
      );
    }
  }

  /** Under the instance's lock (skipped when someone holds it), re-read the row and repair it if still needed. */
  private async repair(row: InstanceRow, stillNeeded: (r: InstanceRow) => boolean, fix: (r: InstanceRow) => Promise<void>): Promise<boolean> {
    const r = await this.deps.locks.tryWith(row.id, async () => {
      const fresh = await this.deps.repo.byId(row.id);
      if (!fresh || !stillNeeded(fresh)) return false;
      await fix(fresh);
      return true;
    });
    return r === true;
  }

  /** Why the instance's workload is not running now, or undefined when it is (or is being restarted by the runtime). */
  private async deadReason(id: string): Promise<string | undefined> {
    const s = await this.deps.runtime.inspect(id);
    if (s.state === 'running' || s.state === 'starting') return undefined;
    if (s.state === 'node_down') return NODE_DOWN;
    if (s.state === 'missing') return 'The instance container is missing; restart the instance';
    if (s.state === 'created') return 'The agent container never started; restart the instance';
    return s.error ?? `The agent exited with code ${s.exitCode}`;
  }
}
