import { sql, type Kysely } from 'kysely';
import type { InstanceRow, ProvisionerDB, Step, UpgradeState } from '../db/schema.ts';
import { PORT_LOCK_CLASS, USER_LOCK_CLASS } from './locks.ts';

/** The image an upgrade moves an instance to. */
export interface UpgradeTarget {
  version: string;
  image: string;
  digest: string;
}

/** An upgrade begins: the image it moves away from is kept to roll back to. */
const startUpgrade = (t: UpgradeTarget) => ({
  upgrade_from_version: sql<string>`version`,
  upgrade_from_image: sql<string>`image`,
  upgrade_from_digest: sql<string | null>`image_digest`,
  upgrade_to_version: t.version,
  version: t.version,
  image: t.image,
  image_digest: t.digest,
  upgrade_state: 'upgrading' as const,
  upgrade_reason: null,
});

/**
 * An operation that overtakes an upgrade whose agent is not ready yet rolls it back: the row names the kept image
 * again (the recreate that follows runs it). Anything else is left as it is.
 */
const endUpgrade = (reason: string) => {
  const upgrading = sql`upgrade_state = 'upgrading'`;
  return {
    version: sql<string>`case when ${upgrading} then upgrade_from_version else version end`,
    image: sql<string>`case when ${upgrading} then upgrade_from_image else image end`,
    image_digest: sql<string | null>`case when ${upgrading} then upgrade_from_digest else image_digest end`,
    upgrade_reason: sql<string | null>`case when ${upgrading} then ${reason}::text else upgrade_reason end`,
    upgrade_state: sql<UpgradeState | null>`case when ${upgrading} then 'rolled_back' else upgrade_state end`,
  };
};

/** What lease_instance needs besides the id: the owner, the tier's limits and the port range. */
export interface LeaseInput {
  id: string;
  userId: string;
  maxInstances: number;
  portStart: number;
  portEnd: number;
  name: string;
  framework: string;
  version: string;
  image: string;
  tier: string;
  memoryMb: number;
  cpus: number;
  pids: number;
  tokenHash: string;
  wallet: string | null;
}

/**
 * The instances table, one named query per read and one named function per transition. Every transition that a
 * later operation may have overtaken is guarded by the row's generation (an operation that changes the workload
 * bumps it), so a late writer can never undo its successor's state.
 */
export class InstanceRepo {
  private readonly db: Kysely<ProvisionerDB>;
  private readonly readyTimeoutSeconds: number;

  constructor(db: Kysely<ProvisionerDB>, readyTimeoutSeconds: number) {
    this.db = db;
    this.readyTimeoutSeconds = readyTimeoutSeconds;
  }

  /** The caller's instance (deleting ones only when asked: an interrupted delete can be retried). */
  owned(userId: string, instanceId: string, includeDeleting = false): Promise<InstanceRow | undefined> {
    let q = this.db.selectFrom('instances').selectAll().where('id', '=', instanceId).where('user_id', '=', userId);
    if (!includeDeleting) q = q.where('deleting_at', 'is', null);
    return q.executeTakeFirst();
  }

  byId(id: string): Promise<InstanceRow | undefined> {
    return this.db.selectFrom('instances').selectAll().where('id', '=', id).executeTakeFirst();
  }

  listOwned(userId: string): Promise<InstanceRow[]> {
    return this.db.selectFrom('instances').selectAll().where('user_id', '=', userId).where('deleting_at', 'is', null).orderBy('created_at').execute();
  }

  /** The ids of a wallet's running or provisioning instances. */
  async liveOfWallet(wallet: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('instances')
      .select('id')
      .where('wallet_address', '=', wallet)
      .where('status', 'in', ['running', 'provisioning', 'sleeping'])
      .where('deleting_at', 'is', null)
      .execute();
    return rows.map((r) => r.id);
  }

  /** Instances counted against the tier, and the bytes of their volumes and of the owner's backups. */
  async usage(userId: string): Promise<{ instances: number; bytes: number }> {
    const r = await this.db
      .selectFrom('instances')
      .select((eb) => [
        eb.fn.countAll<number>().as('n'),
        eb.fn.coalesce(eb.fn.sum<number>('storage_bytes'), sql<number>`0`).as('bytes'),
        sql<string>`(select coalesce(sum(size_bytes), 0) from backups b where b.user_id = ${userId}::uuid)`.as('backup_bytes'),
      ])
      .where('user_id', '=', userId)
      .where('deleting_at', 'is', null)
      .executeTakeFirstOrThrow();
    return { instances: Number(r.n), bytes: Number(r.bytes) + Number(r.backup_bytes) };
  }

  /**
   * One statement (see the lease_instance migrations): per-user lock → count → refuse at the limit (SQLSTATE
   * AH001) → port lock → lowest free port (AH002 when none) → row, committed without waiting for the disk.
   * UNIQUE(port) backs it up.
   */
  async lease(l: LeaseInput): Promise<InstanceRow> {
    const r = await sql<InstanceRow>`select * from lease_instance(
      ${l.id}, ${l.userId}::uuid, ${l.maxInstances}::int, ${l.portStart}::int, ${l.portEnd}::int,
      ${USER_LOCK_CLASS}::int, ${PORT_LOCK_CLASS}::int, ${l.name}, ${l.framework}, ${l.version}, ${l.image}, ${l.tier},
      ${l.memoryMb}::int, ${l.cpus}::real, ${l.pids}::int, ${l.tokenHash}, ${l.wallet}::text)`.execute(this.db);
    return r.rows[0]!;
  }

  /** How far an operation got, written before each Docker change so the reconciler can finish or undo it. */
  async setStep(id: string, step: Step, extra: { container_id?: string; node_host?: string | null; image_digest?: string | null } = {}): Promise<void> {
    await this.db
      .updateTable('instances')
      .set({ step, updated_at: new Date(), ...extra })
      .where('id', '=', id)
      .execute();
  }

  /** The workload of this generation was started: the readiness deadline runs from now. */
  markStarted(id: string, generation: number, now = new Date(), deadline = new Date(now.getTime() + this.readyTimeoutSeconds * 1000)): Promise<InstanceRow> {
    return this.db
      .updateTable('instances')
      .set({ step: 'done', started_at: now, last_activity: now, updated_at: now, ready_deadline: deadline })
      .where('id', '=', id)
      .where('generation', '=', generation)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async markFailed(id: string, generation: number, reason: string): Promise<void> {
    const now = new Date();
    await this.db
      .updateTable('instances')
      .set({ status: 'failed', step: 'done', failure_reason: reason, crash_streak: 0, last_activity: now, updated_at: now })
      .where('id', '=', id)
      .where('generation', '=', generation)
      .where('deleting_at', 'is', null)
      .execute();
  }

  /** A stop (or a sleep) begins: the new generation silences the readiness watcher and the healer of the old one. */
  async markStopping(id: string, step: 'stopping' | 'sleeping' = 'stopping'): Promise<void> {
    await this.db
      .updateTable('instances')
      .set({
        step,
        generation: sql`generation + 1`,
        updated_at: new Date(),
        ...endUpgrade('The instance was stopped before the agent was ready on the new image'),
      })
      .where('id', '=', id)
      .execute();
  }

  /** The workload is stopped: stopped, asleep (idle, its container stopped), or failed with a reason (the quota guard's). */
  async markStopped(id: string, failureReason?: string, asleep = false): Promise<void> {
    const now = new Date();
    await this.db
      .updateTable('instances')
      .set({
        status: failureReason ? 'failed' : asleep ? 'sleeping' : 'stopped',
        sleep_depth: !failureReason && asleep ? 'stopped' : null,
        step: 'done',
        failure_reason: failureReason ?? null,
        crash_streak: 0,
        last_activity: now,
        updated_at: now,
      })
      .where('id', '=', id)
      .execute();
  }

  /** A light sleep reached: its workload frozen (with its memory pushed out to swap: swapped). */
  async markFrozen(id: string, depth: 'frozen' | 'swapped'): Promise<void> {
    const now = new Date();
    await this.db
      .updateTable('instances')
      .set({ status: 'sleeping', sleep_depth: depth, step: 'done', last_activity: now, updated_at: now })
      .where('id', '=', id)
      .execute();
  }

  /**
   * A frozen workload resumed: running again, as it was. With `traffic` (a wake for its owner) its idle time starts
   * now, so the next pass does not put it back to sleep before the edge reports the request that woke it.
   */
  async markThawed(id: string, traffic = true): Promise<void> {
    const now = new Date();
    await this.db
      .updateTable('instances')
      .set({ status: 'running', sleep_depth: null, step: 'done', ...(traffic ? { traffic_at: now } : {}), last_activity: now, updated_at: now })
      .where('id', '=', id)
      .execute();
  }

  /**
   * A recreate begins, with a new token hash when one was minted and the new tier's limits when it changed. With
   * `upgrade` it is an upgrade to that image (the current one kept to roll back to); any other recreate of an
   * instance that is upgrading rolls the upgrade back (to the kept image, with `rollbackReason`).
   */
  markRecreating(
    id: string,
    change: {
      tokenHash?: string;
      tier?: { tier: string; memory_mb: number; cpus: number; pids: number };
      upgrade?: UpgradeTarget;
      rollbackReason?: string;
      /** A wake that could not resume the frozen agent boots it instead: why (its status event carries it). */
      wakeWarning?: string;
    },
  ): Promise<InstanceRow> {
    return this.db
      .updateTable('instances')
      .set({
        status: 'provisioning',
        step: 'recreating',
        generation: sql`generation + 1`,
        failure_reason: null,
        crash_streak: 0, // a restart by the owner starts the backoff afresh
        next_restart_at: null,
        sleep_depth: null,
        wake_warning: change.wakeWarning ?? null,
        updated_at: new Date(),
        ...(change.tokenHash ? { access_token_hash: change.tokenHash } : {}),
        ...(change.tier ?? {}),
        ...(change.upgrade ? startUpgrade(change.upgrade) : endUpgrade(change.rollbackReason ?? 'Another operation on the instance interrupted the upgrade')),
      })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /** The row stops counting and is hidden; its port stays leased until its Docker objects are gone. */
  async markDeleting(id: string): Promise<Date> {
    const marked = await this.db
      .updateTable('instances')
      .set({ step: 'deleting', deleting_at: sql`coalesce(deleting_at, now())`, generation: sql`generation + 1`, updated_at: new Date() })
      .where('id', '=', id)
      .returning(['deleting_at'])
      .executeTakeFirst();
    return (marked?.deleting_at as Date | null | undefined) ?? new Date();
  }

  /** The last step of a delete: releases the port. */
  async remove(id: string): Promise<void> {
    await this.db.deleteFrom('instances').where('id', '=', id).execute();
  }
}
