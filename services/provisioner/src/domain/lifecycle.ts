import { AppError, type contracts, type Logger, type TierTable } from '@agenthost/shared';
import type { InstanceRow } from '../db/schema.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { describe } from '../docker/call.ts';
import { hashToken } from '@agenthost/shared';
import { newToken } from './access-token.ts';
import { pooled } from './pool-owner.ts';
import type { LocalImages } from './images.ts';
import type { InstanceRepo, UpgradeTarget } from './instance-repo.ts';
import type { OpLocks } from './locks.ts';
import type { Readiness } from './readiness.ts';
import type { Credentials, InstanceRuntime } from './runtime.ts';
import type { StatsSampler } from './stats.ts';

type TierName = contracts.TierName;

export interface InstanceEvents {
  created(p: { instance_id: string; user_id: string; created_at: string }): Promise<void>;
  deleted(p: { instance_id: string; user_id: string; deleted_at: string }): Promise<void>;
}

export interface LifecycleDeps {
  repo: InstanceRepo;
  engine: DockerEngine;
  images: LocalImages;
  locks: OpLocks;
  tiers: TierTable;
  log: Logger;
  /** keyvault: fresh instance secret + derived key, for each container that is created. */
  issueCredentials(userId: string, instanceId: string): Promise<Credentials>;
  /** keyvault: drop an instance's keys and credentials now (a delete answers only after this). */
  purgeKeys(userId: string, instanceId: string): Promise<void>;
  events: InstanceEvents;
  readiness: Readiness;
  stats: StatsSampler;
  /** Where instances run (containers on one engine, or swarm services). */
  runtime: InstanceRuntime;
  pause(point: string): Promise<void>;
}

type Owned = { user_id: string; instance_id: string };

/** How a recreate differs from a plain restart: an upgrade's target image, a rollback's reason, its own readiness timeout. */
export interface RecreateOptions {
  upgrade?: UpgradeTarget;
  rollbackReason?: string;
  readySeconds?: number;
  /** A wake that could not resume the frozen agent: why (the instance boots instead). */
  wakeWarning?: string;
}

/**
 * Restart, start, stop and delete of existing instances. Docker and the database are kept in step by two rules:
 *  - every operation on an instance holds its operation lock (see locks.ts) and writes how far it got
 *    (`step`) before each Docker change, so the reconciler can finish or undo it after a crash;
 *  - a row exists before any Docker object of its instance and is deleted after the last one, so a
 *    labelled container or volume without a row is always an orphan.
 * The `…Locked` functions expect the caller to hold the lock: the reconciler, the quota guard, backups and the
 * swarm drainer use them too.
 */
export class InstanceLifecycle {
  private readonly deps: LifecycleDeps;

  constructor(deps: LifecycleDeps) {
    this.deps = deps;
  }

  /** Recreate the container (fresh credentials, same volume and port) so the agent reloads its keys. */
  restart(input: Owned & { tier?: TierName | undefined }) {
    return this.recreateOwned(input, ['running', 'provisioning', 'failed', 'sleeping'], 'restart');
  }

  start(input: Owned & { tier?: TierName | undefined }) {
    return this.recreateOwned(input, ['stopped', 'failed', 'sleeping'], 'start');
  }

  async stop(input: Owned) {
    await this.owned(input);
    this.deps.engine.assertUp();
    return this.deps.locks.with(input.instance_id, async () => {
      const row = await this.owned(input);
      if (row.status === 'stopped') throw conflict('stop', row.status);
      assertNotUpgrading(row);
      await this.stopLocked(row);
      return { success: true, instance_id: row.id, status: 'stopped' as const };
    });
  }

  /**
   * The subscription of a wallet ended (inactive, or past expires_at in chain time): its running instances
   * stop, keeping their data, as spec §3.2 says instances run only until expiration. They can be started
   * again once the subscription is active (start, like every instance verb, needs one). Returns how many stopped.
   */
  async suspendWallet(wallet: string): Promise<number> {
    let stopped = 0;
    for (const id of await this.deps.repo.liveOfWallet(wallet)) {
      this.deps.engine.assertUp();
      await this.deps.locks.with(id, async () => {
        const row = await this.deps.repo.byId(id);
        if (!row || row.deleting_at || !(row.status === 'running' || row.status === 'provisioning' || row.status === 'sleeping')) return;
        await this.stopLocked(row);
        stopped++;
      });
    }
    return stopped;
  }

  /** Under the lock: step stopping → docker stop → stopped (or failed with a reason: the quota guard). */
  async stopLocked(row: InstanceRow, failureReason?: string): Promise<void> {
    await this.deps.repo.markStopping(row.id);
    await this.deps.pause('stopping');
    await this.deps.runtime.stop(row.id);
    await this.deps.repo.markStopped(row.id, failureReason);
    this.deps.stats.forget(row.id);
  }

  async remove(input: Owned): Promise<{ success: boolean; instance_id: string; deleted_at: string }> {
    // A delete that was interrupted (Docker down mid-way) can be retried: deleting rows are found here.
    await this.owned(input, true);
    this.deps.engine.assertUp();
    return this.deps.locks.with(input.instance_id, async () => {
      const row = await this.owned(input, true);
      // The keys go first, so none of a deleted instance can be listed or fetched once the delete has
      // answered. If keyvault cannot be reached, the delete fails (503) and nothing else has changed.
      await this.deps.purgeKeys(row.user_id, row.id);
      const deletedAt = await this.finishDelete(row, { keysPurged: true });
      return { success: true, instance_id: row.id, deleted_at: deletedAt.toISOString() };
    });
  }

  private async recreateOwned(input: Owned & { tier?: TierName | undefined }, from: string[], verb: string) {
    await this.owned(input);
    this.deps.engine.assertUp();
    return this.deps.locks.with(input.instance_id, async () => {
      const row = await this.owned(input);
      if (!from.includes(row.status)) throw conflict(verb, row.status);
      assertNotUpgrading(row);
      await this.deps.images.assertPresent(row.image_digest ?? row.image);
      const minted = await this.recreateLocked(row, input.tier);
      return { success: true, instance_id: row.id, status: 'provisioning' as const, ...(minted ? { access_token: minted } : {}) };
    });
  }

  /**
   * Under the lock: fresh credentials first (if keyvault is down nothing changes), then step
   * recreating → remove the old container → create and start a new one on the same volume and port.
   * The gateway token is carried over from the old container; when there is none left (a crash removed
   * it), a new one is minted and returned.
   */
  async recreateLocked(row: InstanceRow, tier?: TierName, opts: RecreateOptions = {}): Promise<string | undefined> {
    const { repo, runtime, log } = this.deps;
    const creds = await this.deps.issueCredentials(row.user_id, row.id);
    let token = await runtime.token(row.id);
    const minted = token ? undefined : newToken();
    token ??= minted!;
    const limits = tier ? this.deps.tiers[tier] : undefined;
    const updated = await repo.markRecreating(row.id, {
      ...(minted ? { tokenHash: hashToken(minted) } : {}),
      ...(limits && tier ? { tier: { tier, memory_mb: limits.memory_mb, cpus: limits.cpus, pids: limits.pids } } : {}),
      ...(opts.upgrade ? { upgrade: opts.upgrade } : {}),
      ...(opts.rollbackReason ? { rollbackReason: opts.rollbackReason } : {}),
      ...(opts.wakeWarning ? { wakeWarning: opts.wakeWarning } : {}),
    });
    this.deps.stats.forget(row.id);
    try {
      await this.deps.pause('recreating');
      await runtime.remove(row.id);
      const created = await runtime.create(updated, token);
      await repo.setStep(row.id, 'recreating', { container_id: created.runtimeId, node_host: created.host ?? updated.node_host });
      await this.deps.pause('recreated');
      await this.deps.readiness.staggered(async () => {
        await runtime.start(row.id, creds);
        const now = new Date();
        const started = await repo.markStarted(
          row.id,
          updated.generation,
          now,
          opts.readySeconds ? new Date(now.getTime() + opts.readySeconds * 1000) : undefined,
        );
        this.deps.readiness.watch({
          id: row.id,
          generation: started.generation,
          port: row.port,
          host: runtime.probeHost(started),
          deadline: started.ready_deadline!,
          startedAt: started.started_at!,
        });
      });
      return minted;
    } catch (err) {
      log.warn({ instance_id: row.id, err: describe(err) }, 'recreating the container failed');
      if (opts.upgrade) {
        // Docker down: the row stays in step recreating, and the reconciler rolls the upgrade back once Docker answers.
        if (err instanceof AppError && err.code === 'DOCKER_UNAVAILABLE') throw err;
        // The new image could not even be started: back to the kept one at once (the cause is in the log, not the status).
        await this.recreateLocked((await repo.byId(row.id))!, undefined, { rollbackReason: 'The container of the new image could not be created or started' });
        return minted;
      }
      await repo.markFailed(row.id, updated.generation, 'The container could not be recreated; restart the instance to retry').catch(() => {});
      throw err;
    }
  }

  /**
   * Undo a create that failed after the lease (the create itself, or the reconciler after a crash): everything
   * goes, as for a delete; an instance its user was never told of is forgotten without a deleted event (finishDelete).
   * `credentialsIssued: false`: the create knows keyvault issued it none, so there is nothing to purge.
   */
  async undo(row: InstanceRow, opts: { credentialsIssued?: boolean } = {}): Promise<void> {
    await this.finishDelete(row, { keysPurged: opts.credentialsIssued === false });
  }

  /**
   * Mark the row deleting (it no longer counts and is hidden), then remove container → volume → tell keyvault →
   * delete the row, which releases the port last. Idempotent at every step: the reconciler calls it again after a crash.
   * keyvault is told in one of two ways (docs/decisions/0053-a-refused-create-purges-its-keys.md):
   *  - an instance its user was told of (announced) gets events.instance.deleted, exactly once (de-duplicated by
   *    id): the user's webhooks and event streams end with it, and keyvault drops what keys are left;
   *  - an undone create its user never saw gets no event (it would reach them as the deletion of an instance they
   *    never had): its keys and credentials are purged by request instead (`keysPurged`: already done, or none were
   *    issued). When keyvault cannot be reached this throws and the row stays, hidden and deleting, for the
   *    reconciler to finish at its next pass: no credential outlives its row.
   */
  async finishDelete(row: InstanceRow, opts: { keysPurged?: boolean } = {}): Promise<Date> {
    const deletedAt = await this.deps.repo.markDeleting(row.id);
    this.deps.stats.forget(row.id);
    await this.deps.pause('deleting');
    await this.deps.runtime.remove(row.id);
    await this.deps.pause('container_removed');
    await this.deps.runtime.removeVolume(row.id, row.node_host);
    await this.deps.pause('volume_removed');
    if (pooled(row)) {
      // A warm pool agent was nobody's and was issued nothing (pool-owner.ts): no event, nothing to purge.
    } else if (announced(row)) {
      await this.deps.events.deleted({ instance_id: row.id, user_id: row.user_id, deleted_at: deletedAt.toISOString() });
    } else if (!opts.keysPurged) {
      await this.deps.purgeKeys(row.user_id, row.id);
    }
    await this.deps.repo.remove(row.id);
    this.deps.log.info({ instance_id: row.id, port: row.port }, 'instance deleted');
    return deletedAt;
  }

  private async owned(input: Owned, includeDeleting = false): Promise<InstanceRow> {
    const row = await this.deps.repo.owned(input.user_id, input.instance_id, includeDeleting);
    if (!row) throw new AppError('INSTANCE_NOT_FOUND');
    return row;
  }
}

/**
 * Whether an instance's user may have been told it exists. The create publishes events.instance.created only after
 * markStarted has set started_at, which nothing clears again: a row without it (a create undone, by the create or by
 * the reconciler after a crash) was never announced.
 */
export const announced = (row: InstanceRow): boolean => row.started_at !== null;

/** An upgrade settles by itself (upgraded or rolled back) by its readiness deadline; the owner's verbs wait for it. */
export function assertNotUpgrading(row: InstanceRow): void {
  if (row.upgrade_state === 'upgrading' && row.status === 'provisioning') {
    throw new AppError(
      'INSTANCE_STATE_CONFLICT',
      'An upgrade of this instance is in progress: it ends when the agent is ready on the new image or rolled back',
      { retryAfter: 5 },
    );
  }
}

const conflict = (verb: string, status: string) => new AppError('INSTANCE_STATE_CONFLICT', `Cannot ${verb} an instance that is ${status}`);
