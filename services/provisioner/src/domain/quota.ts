import { UNLIMITED, type Logger, type TierTable } from '@agenthost/shared';
import type { InstanceRow } from '../db/schema.ts';
import { describe } from '../docker/call.ts';
import { mountPoints, type QuotaVolumes } from '../docker/volumes.ts';
import type { InstanceRepo } from './instance-repo.ts';
import type { InstanceLifecycle } from './lifecycle.ts';
import type { OpLocks } from './locks.ts';
import { pooled } from './pool-owner.ts';

const MiB = 1024 * 1024;
/** The failure_reason prefix of an instance stopped for storage (machine-readable, then the human text). */
const QUOTA_REASON = 'storage_quota_exceeded';

type TierName = keyof TierTable;

export interface QuotaDeps {
  repo: InstanceRepo;
  volumes: QuotaVolumes;
  /** Docker answers (no stop is attempted while it does not; sizes are still recorded). */
  dockerUp: () => boolean;
  locks: OpLocks;
  lifecycle: InstanceLifecycle;
  tiers: TierTable;
  log: Logger;
  intervalSeconds: number;
  /** An instance (re)started less than this long ago is not stopped, so its owner can start it to delete files. */
  graceSeconds: number;
}

/**
 * Keeps storage within the tier while instances run. Each volume is hard-capped (docker/volumes.ts), so
 * one instance can never write past its cap; this guard measures every size-limited volume with one
 * statfs call each (cheap enough to do every QUOTA_CHECK_INTERVAL_SECONDS for all of them, so volumes near
 * their cap are not treated apart), stores the size for the usage call, and stops (status failed,
 * failure_reason `storage_quota_exceeded: ...`, events.instance.status) the live instances
 *  - whose volume is full (less than 1 MiB or 2 % free): the agent is getting ENOSPC, or
 *  - of a user whose volumes together hold the tier's storage_mb or more (several instances).
 */
export class QuotaGuard {
  private readonly deps: QuotaDeps;
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(deps: QuotaDeps) {
    this.deps = deps;
  }

  start(): void {
    this.timer = setInterval(() => void this.checkAll(), Math.max(1, this.deps.intervalSeconds) * 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async checkAll(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await this.pass();
    } catch (err) {
      this.deps.log.warn({ err: describe(err) }, 'storage quota check failed; will retry');
    } finally {
      this.running = false;
    }
  }

  private async pass(): Promise<void> {
    const { repo, volumes, tiers } = this.deps;
    const rows = await repo.allNotDeleting();
    const mounts = await mountPoints();
    const full = new Map<string, number>();
    const byUser = new Map<string, { bytes: number; limitMb: number; tier: string; rows: InstanceRow[] }>();
    for (const row of rows) {
      const limitMb = tiers[row.tier as TierName]?.storage_mb ?? UNLIMITED;
      const u = await volumes.usage(row.id, mounts).catch(() => undefined);
      let bytes = Number(row.storage_bytes);
      if (u) {
        bytes = u.usedBytes;
        if (u.freeBytes < Math.max(MiB, u.sizeBytes * 0.02)) {
          full.set(row.id, u.sizeBytes);
          // A full volume holds its whole allocation (ext4's own overhead is not the user's to use), so
          // the user is at the tier's storage and gets no new instance until files or instances go.
          if (limitMb !== UNLIMITED) bytes = Math.max(bytes, limitMb * MiB);
        }
        if (bytes !== Number(row.storage_bytes)) await repo.setStorageBytes(row.id, bytes);
      }
      // Each warm pool agent counts alone: the pool is not a user whose agents share an allowance.
      const owner = pooled(row) ? row.id : row.user_id;
      const entry = byUser.get(owner) ?? { bytes: 0, limitMb, tier: row.tier, rows: [] };
      entry.bytes += bytes;
      // Rows of one user normally share a tier; the largest allowance wins when they do not.
      if (limitMb === UNLIMITED || (entry.limitMb !== UNLIMITED && limitMb > entry.limitMb)) Object.assign(entry, { limitMb, tier: row.tier });
      entry.rows.push(row);
      byUser.set(owner, entry);
    }
    for (const [, user] of byUser) {
      const over = user.limitMb !== UNLIMITED && user.bytes >= user.limitMb * MiB;
      for (const row of user.rows) {
        const capBytes = full.get(row.id);
        if (!over && capBytes === undefined) continue;
        // A full volume says so first: it is why this instance stopped, whatever the user's other instances hold.
        const reason =
          capBytes !== undefined
            ? `${QUOTA_REASON}: the instance's volume is full (${mb(capBytes)} MB, the storage of the ${row.tier} tier); start it to delete files`
            : `${QUOTA_REASON}: your instances store ${mb(user.bytes)} MB and the ${user.tier} tier allows ${user.limitMb} MB; start an instance to delete files, or delete an instance`;
        await this.enforce(row, reason);
      }
    }
  }

  /** Stop one live instance for storage, under its operation lock (skipped when an operation holds it). */
  private async enforce(row: InstanceRow, reason: string): Promise<void> {
    const { repo, locks, lifecycle, log, graceSeconds } = this.deps;
    if (!(row.status === 'running' || row.status === 'provisioning') || row.step !== 'done' || !this.deps.dockerUp()) return;
    if (row.started_at && Date.now() - new Date(row.started_at).getTime() < graceSeconds * 1000) return;
    await locks.tryWith(row.id, async () => {
      const fresh = await repo.byId(row.id);
      if (!fresh || fresh.deleting_at || fresh.generation !== row.generation || fresh.step !== 'done') return;
      await lifecycle.stopLocked(fresh, reason);
      log.warn({ event: 'storage_quota_exceeded', instance_id: row.id, user_id: row.user_id, reason }, 'instance stopped: storage quota exceeded');
    });
  }
}

const mb = (bytes: number) => Math.round((bytes / MiB) * 10) / 10;
