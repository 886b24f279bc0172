import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { AppError, UNLIMITED, type contracts, type Logger, type TierTable } from '@agenthost/shared';
import type { BackupRow, InstanceRow, ProvisionerDB } from '../db/schema.ts';
import { describe } from '../docker/call.ts';
import type { InstanceCreator } from '../domain/create.ts';
import type { InstanceRepo } from '../domain/instance-repo.ts';
import type { LiveView } from '../domain/instance-view.ts';
import type { InstanceLifecycle } from '../domain/lifecycle.ts';
import type { OpLocks } from '../domain/locks.ts';
import type { InstanceRuntime } from '../domain/runtime.ts';
import { archiveKey, openArchive, sealArchive, verifyArchive, type ArchiveIds } from './archive.ts';
import type { ArchiveStore } from './store.ts';

type P = typeof contracts.provisioner;
type In<C extends keyof P> = P[C] extends contracts.Contract ? contracts.In<P[C]> : never;
type TierName = contracts.TierName;
type View = contracts.provisioner.BackupView;

export interface BackupsDeps {
  db: Kysely<ProvisionerDB>;
  runtime: InstanceRuntime;
  locks: OpLocks;
  repo: InstanceRepo;
  view: Pick<LiveView, 'usage'>;
  creator: Pick<InstanceCreator, 'create'>;
  lifecycle: Pick<InstanceLifecycle, 'remove' | 'recreateLocked'>;
  tiers: TierTable;
  log: Logger;
  /** The backup master key (BACKUP_KEY); undefined: backups are refused. */
  masterKey: Buffer | undefined;
  /** Where this deployment's archives are kept (<BACKUP_DIR>/<scope>, or <scope>/ in a bucket), one per backup. */
  store: ArchiveStore;
  published(e: View & { user_id: string }): Promise<void>;
}

/** A backup waits this long for another operation on its instance (a scheduled one skips a busy instance). */
const LOCK_WAIT_MS = 10_000;

/**
 * Backups of instance volumes (either driver): taken through the runtime's archive of the volume while the
 * agent is paused, encrypted for that user, instance and backup (archive.ts), kept in the store (store.ts), at most
 * the tier's backups_kept per instance, and counted in the owner's storage. Restoring replaces the volume and
 * recreates the container with a new access token (shown once); a clone is a new instance restored the same way.
 */
export class Backups {
  private readonly deps: BackupsDeps;

  constructor(deps: BackupsDeps) {
    this.deps = deps;
  }

  // ------------------------------------------------------------------ take

  async create(input: In<'backup'>, kind: 'manual' | 'scheduled' = 'manual'): Promise<View> {
    const { db, locks, log } = this.deps;
    const export_ = this.exporter();
    const limits = this.deps.tiers[input.tier];
    if (limits.backups_kept === 0) throw new AppError('STORAGE_LIMIT_EXCEEDED', `The ${input.tier} tier keeps no backups`);
    await this.owned(input.user_id, input.instance_id);
    await this.assertStorage(input.user_id, input.tier, limits.storage_mb);
    const taken = await locks.with(
      input.instance_id,
      async () => {
        const row = await this.owned(input.user_id, input.instance_id);
        const ids = { user_id: row.user_id, instance_id: row.id, backup_id: `bk-${randomBytes(10).toString('hex')}` };
        // Sealed while the agent is paused; kept (uploaded, for a bucket) after it runs again.
        const staged = await this.deps.store.stage(ids.backup_id);
        let size = 0;
        try {
          await export_(row.id, async (tar) => {
            size = await sealArchive(staged.file, this.key(ids), tar);
          });
          await staged.commit();
        } catch (err) {
          await staged.discard().catch(() => {});
          throw err;
        }
        // The new row and the retention in one transaction: nobody ever sees more backups than the tier keeps.
        const { saved, dropped } = await db.transaction().execute(async (tx) => {
          const saved = await tx
            .insertInto('backups')
            .values({ id: ids.backup_id, user_id: row.user_id, instance_id: row.id, kind, size_bytes: size, framework: row.framework, version: row.version })
            .returningAll()
            .executeTakeFirstOrThrow();
          const old = await tx
            .selectFrom('backups')
            .select('id')
            .where('user_id', '=', row.user_id)
            .where('instance_id', '=', row.id)
            .orderBy('created_at', 'desc')
            .orderBy('id')
            .offset(limits.backups_kept)
            .limit(1000)
            .execute();
          if (old.length)
            await tx
              .deleteFrom('backups')
              .where(
                'id',
                'in',
                old.map((o) => o.id),
              )
              .execute();
          return { saved, dropped: old.map((o) => o.id) };
        });
        for (const id of dropped)
          await this.deps.store.remove(id).catch((err) => log.warn({ backup_id: id, err: describe(err) }, 'old archive not removed; the sweep retries'));
        log.info({ instance_id: row.id, backup_id: ids.backup_id, kind, size_bytes: size, dropped: dropped.length }, 'backup taken');
        return view(saved);
      },
      LOCK_WAIT_MS,
    );
    await this.deps
      .published({ ...taken, user_id: input.user_id })
      .catch((err) => log.warn({ backup_id: taken.backup_id, err: describe(err) }, 'backup event not published'));
    return taken;
  }

  // ------------------------------------------------------------------ read

  async list(input: In<'backups'>): Promise<{ instance_id: string; backups: View[] }> {
    const rows = await this.deps.db
      .selectFrom('backups')
      .selectAll()
      .where('user_id', '=', input.user_id)
      .where('instance_id', '=', input.instance_id)
      .orderBy('created_at', 'desc')
      .execute();
    // A deleted instance is still known by its backups; an id the caller never had is not found.
    if (rows.length === 0) await this.owned(input.user_id, input.instance_id);
    return { instance_id: input.instance_id, backups: rows.map(view) };
  }

  // ------------------------------------------------------------------ restore

  async restore(input: In<'restore'>) {
    this.exporter();
    const backup = await this.backup(input.user_id, input.backup_id);
    const target = await this.owned(input.user_id, input.instance_id);
    if (backup.framework !== target.framework)
      throw new AppError('INSTANCE_STATE_CONFLICT', `The backup is of a ${backup.framework} instance, this one runs ${target.framework}`);
    const token = await this.deps.locks.with(
      input.instance_id,
      async () => this.restoreLocked(await this.owned(input.user_id, input.instance_id), backup, input.tier),
      LOCK_WAIT_MS,
    );
    return { success: true, instance_id: input.instance_id, status: 'provisioning' as const, access_token: token, backup_id: backup.id };
  }

  /** A new instance of the caller's (counted against the tier like a create) holding the backup's files. */
  async clone(input: In<'clone'>) {
    this.exporter();
    const { instance_id: source, backup_id, ...create } = input;
    const backup = await this.backup(input.user_id, backup_id);
    if (backup.instance_id !== source) throw new AppError('BACKUP_NOT_FOUND');
    // Checked before anything is made: a bad archive leaves no instance behind.
    await this.deps.store.withFile(backup.id, (file) => verifyArchive(file, this.key(idsOf(backup))));
    const made = await this.deps.creator.create({ ...create, framework: backup.framework, version: backup.version });
    try {
      const token = await this.deps.locks.with(
        made.instance_id,
        async () => this.restoreLocked(await this.owned(input.user_id, made.instance_id), backup, input.tier, true),
        LOCK_WAIT_MS,
      );
      return { ...made, status: 'provisioning' as const, access_token: token, backup_id: backup.id, cloned_from: source };
    } catch (err) {
      // No half clone counts against the tier: the new instance goes again.
      await this.deps.lifecycle
        .remove({ user_id: input.user_id, instance_id: made.instance_id })
        .catch((e) => this.deps.log.error({ instance_id: made.instance_id, err: describe(e) }, 'could not remove a failed clone'));
      throw err;
    }
  }

  /**
   * Under the instance's lock: the archive is checked whole first (nothing changes for one that fails; a clone
   * checked it before its instance was made), then the workload and its volume go, a new volume is filled from the
   * archive, and the container is recreated; it has no container left, so recreateLocked mints a new access
   * token, returned here once.
   */
  private async restoreLocked(row: InstanceRow, backup: BackupRow, tier: TierName | undefined, verified = false): Promise<string> {
    const { runtime, repo, lifecycle, log } = this.deps;
    const key = this.key(idsOf(backup));
    let replacing = false;
    try {
      await this.deps.store.withFile(backup.id, async (file) => {
        if (!verified) await verifyArchive(file, key);
        // Checked: from here the instance's data is replaced.
        replacing = true;
        await runtime.remove(row.id);
        await runtime.removeVolume(row.id, row.node_host);
        await runtime.importData!(row, await openArchive(file, key));
      });
    } catch (err) {
      // An archive that failed its check (or a store that could not be read) before the data went changed nothing.
      if (!replacing) throw err;
      log.warn({ instance_id: row.id, backup_id: backup.id, err: describe(err) }, 'restore failed');
      const fresh = await this.owned(row.user_id, row.id);
      await repo.markFailed(row.id, fresh.generation, 'The restore did not finish; restore the backup again').catch(() => {});
      throw err;
    }
    const token = await lifecycle.recreateLocked(row, tier);
    if (!token) throw new Error('a restored instance must get a new access token');
    log.info({ instance_id: row.id, backup_id: backup.id }, 'backup restored');
    return token;
  }

  // ------------------------------------------------------------------ delete

  async remove(input: In<'removeBackup'>) {
    const backup = await this.backup(input.user_id, input.backup_id);
    if (backup.instance_id !== input.instance_id) throw new AppError('BACKUP_NOT_FOUND');
    await this.drop(backup.id);
    return { success: true, instance_id: input.instance_id, backup_id: backup.id };
  }

  private async drop(id: string): Promise<void> {
    await this.deps.db.deleteFrom('backups').where('id', '=', id).execute();
    await this.deps.store.remove(id);
  }

  /** Archives without a row (a crash between the archive and its row, or after a row's delete) go. */
  async sweep(): Promise<void> {
    const ids = await this.deps.store.ids();
    if (!ids.length) return;
    const known = new Set((await this.deps.db.selectFrom('backups').select('id').where('id', 'in', ids).execute()).map((r) => r.id));
    for (const id of ids) if (!known.has(id)) await this.deps.store.remove(id);
  }

  // ------------------------------------------------------------------ helpers

  /** The runtime's export, or 501 where backups cannot be made (no key configured). */
  private exporter() {
    const { runtime, masterKey } = this.deps;
    if (!masterKey || !runtime.exportData || !runtime.importData) throw new AppError('BACKUPS_UNSUPPORTED');
    return runtime.exportData.bind(runtime);
  }

  private key(ids: ArchiveIds): Buffer {
    return archiveKey(this.deps.masterKey!, ids);
  }

  private async owned(userId: string, instanceId: string): Promise<InstanceRow> {
    const row = await this.deps.repo.owned(userId, instanceId);
    if (!row) throw new AppError('INSTANCE_NOT_FOUND');
    return row;
  }

  /** The caller's backup: another user's is not found, exactly as their instances are. */
  private async backup(userId: string, id: string): Promise<BackupRow> {
    const row = await this.deps.db.selectFrom('backups').selectAll().where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
    if (!row) throw new AppError('BACKUP_NOT_FOUND');
    return row;
  }

  /** Volumes and backups already at the tier's storage: no new backup (the oldest are dropped only after a new one is whole). */
  private async assertStorage(userId: string, tier: string, limitMb: number): Promise<void> {
    if (limitMb === UNLIMITED) return;
    const { storage_used_mb } = await this.deps.view.usage({ user_id: userId });
    if (storage_used_mb >= limitMb)
      throw new AppError('STORAGE_LIMIT_EXCEEDED', `The ${tier} tier allows ${limitMb} MB of storage and your instances and backups use ${storage_used_mb} MB`);
  }
}

const idsOf = (b: BackupRow): ArchiveIds => ({ user_id: b.user_id, instance_id: b.instance_id, backup_id: b.id });

const view = (b: BackupRow): View => ({
  backup_id: b.id,
  instance_id: b.instance_id,
  size_bytes: Number(b.size_bytes),
  created_at: new Date(b.created_at).toISOString(),
  kind: b.kind,
});
