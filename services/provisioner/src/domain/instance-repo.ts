import { sql, type Kysely } from 'kysely';
import type { InstanceRow, ProvisionerDB, Step } from '../db/schema.ts';
import { WatcherTransitions } from './instance-watchers.ts';
import { PORT_LOCK_CLASS, USER_LOCK_CLASS } from './locks.ts';
import { POOL_USER } from './pool-owner.ts';
import { endUpgrade, startUpgrade, type UpgradeTarget } from './upgrade-columns.ts';

export type { UpgradeTarget } from './upgrade-columns.ts';

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
 * The instances table: its reads (instance-reads.ts), the transitions of the watchers (instance-watchers.ts: readiness,
 * self-healing, reconciler, samplers) and here those of the operations, one named function each. Every transition that a
 * later operation may have overtaken is guarded by the row's generation (an operation that changes the workload
 * bumps it), so a late writer can never undo its successor's state.
 */
export class InstanceRepo extends WatcherTransitions {
  private readonly readyTimeoutSeconds: number;

  constructor(db: Kysely<ProvisionerDB>, readyTimeoutSeconds: number) {
    super(db);
    this.readyTimeoutSeconds = readyTimeoutSeconds;
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

  /**
   * A create's claim of a warm pool agent that matches it (claim_pooled_instance: the same per-user lock and count as
   * the lease, AH001 at the limit). Undefined when the pool has none: the create leases and boots one instead.
   */
  async claimPooled(c: Omit<LeaseInput, 'id' | 'portStart' | 'portEnd' | 'image' | 'tokenHash' | 'name'> & { digest: string; name: string | null }) {
    const r = await sql<InstanceRow>`select * from claim_pooled_instance(
      ${POOL_USER}::uuid, ${c.userId}::uuid, ${c.maxInstances}::int, ${USER_LOCK_CLASS}::int, ${c.framework}, ${c.version}, ${c.tier}, ${c.digest},
      ${c.memoryMb}::int, ${c.cpus}::real, ${c.pids}::int, ${c.name}::text, ${c.wallet}::text)`.execute(this.db);
    return r.rows[0];
  }

  /** A claim that Docker failed before anything reached its user: the agent is the pool's again, to be removed. */
  async abandonClaim(id: string): Promise<void> {
    await this.db
      .updateTable('instances')
      .set({ user_id: POOL_USER, step: 'deleting', deleting_at: sql`coalesce(deleting_at, now())`, generation: sql`generation + 1`, updated_at: new Date() })
      .where('id', '=', id)
      .execute();
  }

  /** The warm pool's agents of one framework and tier (not being deleted), oldest first. */
  pool(framework: string, tier: string): Promise<InstanceRow[]> {
    return this.db
      .selectFrom('instances')
      .selectAll()
      .where('user_id', '=', POOL_USER)
      .where('framework', '=', framework)
      .where('tier', '=', tier)
      .where('deleting_at', 'is', null)
      .orderBy('created_at')
      .execute();
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
        checkpoint_id: null,
        step: 'done',
        failure_reason: failureReason ?? null,
        crash_streak: 0,
        last_activity: now,
        updated_at: now,
      })
      .where('id', '=', id)
      .execute();
  }

  /**
   * A sleep reached with the workload kept: frozen (its memory pushed out to swap: swapped), or its agent
   * checkpointed to the image of `checkpointId`.
   */
  async markAsleep(
    id: string,
    depth: 'frozen' | 'swapped' | 'checkpointed',
    checkpointId: string | null = null,
    step: 'done' | 'sleeping' = 'done',
  ): Promise<void> {
    const now = new Date();
    await this.db
      .updateTable('instances')
      .set({ status: 'sleeping', sleep_depth: depth, checkpoint_id: checkpointId, step, last_activity: now, updated_at: now })
      .where('id', '=', id)
      .execute();
  }

  /**
   * A frozen or checkpointed workload resumed: running again, as it was. With `traffic` (a wake for its owner) its idle time starts
   * now, so the next pass does not put it back to sleep before the edge reports the request that woke it.
   */
  async markThawed(id: string, traffic = true): Promise<void> {
    const now = new Date();
    await this.db
      .updateTable('instances')
      .set({
        status: 'running',
        sleep_depth: null,
        checkpoint_id: null,
        step: 'done',
        ...(traffic ? { traffic_at: now } : {}),
        last_activity: now,
        updated_at: now,
      })
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
        boot_retries: 0, // and its boot's retries
        next_restart_at: null,
        sleep_depth: null,
        checkpoint_id: null,
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

  // ------------------------------------------------------------------ a move off a draining swarm node

  /** A move that restarts the instance begins: provisioning in a new generation, so the old one's watchers stand down. */
  async markMoving(id: string): Promise<void> {
    await this.db
      .updateTable('instances')
      .set({ status: 'provisioning', step: 'recreating', failure_reason: null, generation: sql`generation + 1`, updated_at: new Date() })
      .where('id', '=', id)
      .execute();
  }

  /** The volume is on the new node: the row follows. */
  markMoved(id: string, nodeHost: string): Promise<InstanceRow> {
    return this.db.updateTable('instances').set({ node_host: nodeHost, updated_at: new Date() }).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
  }
}
