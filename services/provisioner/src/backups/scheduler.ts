import type { contracts, Logger, TierTable } from '@agenthost/shared';
import { describe } from '../docker/call.ts';
import type { InstanceReads } from '../domain/instance-reads.ts';
import type { OpLocks } from '../domain/locks.ts';
import type { Backups } from './backups.ts';

/**
 * Scheduled backups: every instance of a tier that keeps backups gets one when its last scheduled backup is
 * BACKUP_SCHEDULE_SECONDS old (a day by default). One replica does a pass at a time (a database lock), so
 * replicas never take the same backup twice; a pass that finds an instance busy leaves it to the next one.
 */
export class BackupScheduler {
  private readonly deps: {
    repo: Pick<InstanceReads, 'dueForBackup'>;
    backups: Backups;
    locks: OpLocks;
    tiers: TierTable;
    log: Logger;
    scope: string;
    intervalSeconds: number;
  };
  private timer: NodeJS.Timeout | undefined;

  constructor(deps: BackupScheduler['deps']) {
    this.deps = deps;
  }

  /** Passes run a few times per interval (at most every 5 minutes), so a backup is late by a fraction of it at most. */
  start(): void {
    const every = Math.min(300, Math.max(1, Math.floor(this.deps.intervalSeconds / 4)));
    this.timer = setInterval(() => void this.pass(), every * 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One pass; returns how many backups it took (undefined: another replica is doing one). */
  async pass(): Promise<number | undefined> {
    const { repo, locks, log, scope } = this.deps;
    try {
      return await locks.tryWith(`backup-schedule:${scope}`, async () => {
        await this.deps.backups.sweep();
        const due = new Date(Date.now() - this.deps.intervalSeconds * 1000);
        const rows = await repo.dueForBackup(due);
        let taken = 0;
        for (const row of rows) {
          const tier = row.tier as contracts.TierName;
          if (!(this.deps.tiers[tier]?.backups_kept > 0)) continue;
          try {
            await this.deps.backups.create({ user_id: row.user_id, instance_id: row.id, tier }, 'scheduled');
            taken++;
          } catch (err) {
            log.warn({ instance_id: row.id, err: describe(err) }, 'scheduled backup skipped; the next pass tries again');
          }
        }
        return taken;
      });
    } catch (err) {
      log.warn({ err: describe(err) }, 'backup schedule pass failed; will retry');
      return 0;
    }
  }
}
