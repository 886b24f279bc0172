import { AppError, validationError, type contracts, type Logger } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow } from '../db/schema.ts';
import type { DockerEngine } from '../docker/engine.ts';
import type { LocalImages } from './images.ts';
import type { InstanceRepo } from './instance-repo.ts';
import { assertNotUpgrading, type InstanceLifecycle } from './lifecycle.ts';
import type { OpLocks } from './locks.ts';
import type { InstanceRuntime } from './runtime.ts';

type Upgrade = typeof contracts.provisioner.upgrade;

export interface UpgradeDeps {
  repo: InstanceRepo;
  images: LocalImages;
  locks: OpLocks;
  lifecycle: InstanceLifecycle;
  runtime: InstanceRuntime;
  engine: DockerEngine;
  config: Pick<ProvisionerConfig, 'FRAMEWORK_IMAGES'>;
  log: Logger;
}

/** How long a rollback waits for the instance's lock (an owner's stop or delete finishes first, and wins). */
const ROLLBACK_LOCK_WAIT_MS = 30_000;

/** The reason of a rollback the reconciler makes after the provisioner died mid-upgrade. */
export const INTERRUPTED = 'The provisioner stopped during the upgrade';

/**
 * Upgrades: an instance moves to the image another version resolves to, keeping its volume, port, URL, keys and
 * access token (it is a recreate: lifecycle.recreateLocked). The image it ran is kept in the row until the agent is
 * ready on the new one (upgrade_state upgrading → upgraded). If the agent exits or is not ready by the deadline,
 * the readiness watcher hands the instance here and it is recreated on the kept image (rolled_back, with the
 * reason); a provisioner that dies mid-upgrade leaves the row in step `recreating`, which the reconciler rolls back
 * the same way. Every change of upgrade_state is an events.instance.status event through the status outbox.
 */
export class InstanceUpgrades {
  private readonly deps: UpgradeDeps;

  constructor(deps: UpgradeDeps) {
    this.deps = deps;
  }

  async upgrade(input: contracts.In<Upgrade>): Promise<contracts.Out<Upgrade>> {
    // Swarm services are not moved between images yet (their images resolve per node): a clear 501, like backups.
    if (this.deps.runtime.kind !== 'docker') throw new AppError('UPGRADES_UNSUPPORTED');
    await this.owned(input);
    this.deps.engine.assertUp();
    return this.deps.locks.with(input.instance_id, async () => {
      const row = await this.owned(input);
      if (row.status !== 'running' && row.status !== 'failed') {
        throw new AppError('INSTANCE_STATE_CONFLICT', `Cannot upgrade an instance that is ${row.status}${row.status === 'stopped' ? '; start it first' : ''}`);
      }
      assertNotUpgrading(row);
      const { FRAMEWORK_IMAGES } = this.deps.config;
      const repo = Object.hasOwn(FRAMEWORK_IMAGES, row.framework) ? FRAMEWORK_IMAGES[row.framework] : undefined;
      if (!repo) throw validationError('version', `the framework ${row.framework} is no longer offered`);
      const image = `${repo}:${input.version}`;
      this.deps.images.forget(image); // the tag may have been rebuilt a moment ago
      const digest = await this.deps.images.resolve(image);
      if (digest === row.image_digest && input.version === row.version) {
        throw new AppError('INSTANCE_STATE_CONFLICT', `The instance already runs version ${row.version} (${digest.slice(0, 19)})`);
      }
      this.deps.log.info({ instance_id: row.id, from: row.image_digest ?? row.image, to: digest, version: input.version }, 'upgrade started');
      await this.deps.lifecycle.recreateLocked(row, input.tier, {
        upgrade: { version: input.version, image, digest },
        ...(input.ready_timeout_seconds ? { readySeconds: input.ready_timeout_seconds } : {}),
      });
      const now = (await this.deps.repo.byId(row.id))!;
      return {
        success: true,
        instance_id: row.id,
        status: now.status,
        version: now.version,
        ...(now.image_digest ? { image_digest: now.image_digest } : {}),
        ...(upgradeView(now) ? { upgrade: upgradeView(now)! } : {}),
      };
    });
  }

  /**
   * The readiness watcher's hook: the agent of `generation` did not become ready. If that generation is an upgrade
   * still in progress, it is rolled back (true); anything else is the watcher's to fail (false).
   */
  async notReady(id: string, generation: number, reason: string): Promise<boolean> {
    const row = await this.deps.repo.byId(id);
    if (row?.upgrade_state !== 'upgrading' || row.generation !== generation) return false;
    await this.deps.locks.with(
      id,
      async () => {
        const fresh = await this.deps.repo.byId(id);
        // Overtaken (a stop, delete or restart under the lock ended the upgrade already): nothing left to do.
        if (!fresh || fresh.deleting_at || fresh.upgrade_state !== 'upgrading' || fresh.generation !== generation) return;
        await this.rollbackLocked(fresh, reason);
      },
      ROLLBACK_LOCK_WAIT_MS,
    );
    return true;
  }

  /** Under the lock: recreate the instance on the image it ran before the upgrade. */
  async rollbackLocked(row: InstanceRow, reason: string): Promise<void> {
    this.deps.log.warn({ instance_id: row.id, version: row.version, back_to: row.upgrade_from_version, reason }, 'upgrade failed; rolling back');
    await this.deps.lifecycle.recreateLocked(row, undefined, { rollbackReason: reason });
  }

  private async owned(input: { user_id: string; instance_id: string }): Promise<InstanceRow> {
    const row = await this.deps.repo.owned(input.user_id, input.instance_id);
    if (!row) throw new AppError('INSTANCE_NOT_FOUND');
    return row;
  }
}

/** The `upgrade` field of the status view: the last upgrade, while the row remembers one. */
export function upgradeView(row: InstanceRow): contracts.provisioner.UpgradeView | undefined {
  if (!row.upgrade_state || !row.upgrade_from_version || !row.upgrade_to_version) return undefined;
  return {
    state: row.upgrade_state,
    from_version: row.upgrade_from_version,
    to_version: row.upgrade_to_version,
    ...(row.upgrade_from_digest ? { from_digest: row.upgrade_from_digest } : {}),
    ...(row.upgrade_state === 'rolled_back' && row.upgrade_reason ? { reason: row.upgrade_reason } : {}),
  };
}
