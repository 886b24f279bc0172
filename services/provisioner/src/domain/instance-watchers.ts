import { sql } from 'kysely';
import type { InstanceRow } from '../db/schema.ts';
import { InstanceReads } from './instance-reads.ts';
import { upgradeDone } from './upgrade-columns.ts';

/**
 * The transitions of the instances table that the watchers make, one named function each: the readiness watcher
 * (settleWatch), the self-healing (crashes and restarts), the reconciler (an interrupted recreate, a node back) and
 * the samplers. Like every transition, those a later operation may overtake are guarded by the row's generation.
 * The operations' own transitions are instance-repo.ts, which extends this.
 */
export class WatcherTransitions extends InstanceReads {
  /** The watch of this generation ends in `status`, if the row is still in the status it was watched from. */
  async settleWatch(
    w: { id: string; generation: number; from: 'provisioning' | 'failed' },
    status: 'running' | 'failed',
    reason: string | null,
    now: Date,
  ): Promise<boolean> {
    const r = await this.db
      .updateTable('instances')
      // A newly ready agent's idle time starts now, not at its start: one whose boot outlasted its tier's idle time was
      // put to sleep the moment it became ready (seen: a real OpenClaw booting in 35 s under load, 30 s idle time).
      .set({
        status,
        failure_reason: reason,
        boot_retries: 0,
        last_activity: now,
        updated_at: now,
        ...(status === 'running' ? { ...upgradeDone(), traffic_at: now } : {}),
      })
      .where('id', '=', w.id)
      .where('generation', '=', w.generation)
      .where('status', '=', w.from)
      .where('deleting_at', 'is', null)
      .returning('user_id')
      .executeTakeFirst();
    return r !== undefined;
  }

  /** An agent stopped from outside (docker stop): failed with the reason, unless a later operation overtook it. */
  async markStoppedOutside(id: string, generation: number, reason: string): Promise<boolean> {
    const now = new Date();
    const r = await this.db
      .updateTable('instances')
      .set({ status: 'failed', step: 'done', crash_streak: 0, failure_reason: reason, last_activity: now, updated_at: now })
      .where('id', '=', id)
      .where('generation', '=', generation)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** The agent crashed: its restart is pending (step backoff), failed from the RESTART_FAILED_AFTER-th crash in a row. */
  markCrashed(
    id: string,
    generation: number,
    c: {
      failing: boolean;
      streak: number;
      reason: string;
      kind: InstanceRow['last_exit_kind'];
      oomKilled: boolean;
      exitedAt: Date;
      next: Date;
      failure: string | null;
      now: Date;
    },
  ): Promise<InstanceRow | undefined> {
    return this.db
      .updateTable('instances')
      .set({
        ...exitRecorded(c),
        status: c.failing ? 'failed' : 'provisioning',
        crash_streak: c.streak,
        failure_reason: c.failure,
      })
      .where('id', '=', id)
      .where('generation', '=', generation)
      .returningAll()
      .executeTakeFirst();
  }

  /**
   * The agent exited before it was first ready and is booted again at `next` (step backoff, as a crash's restart): a new
   * generation, still provisioning, its exit recorded. crash_streak stays 0, so the healer does not take it for a crash
   * of a running agent: its next exit is the readiness watcher's again.
   */
  markBootRetry(
    id: string,
    generation: number,
    c: { reason: string; kind: InstanceRow['last_exit_kind']; oomKilled: boolean; exitedAt: Date; next: Date; now: Date },
  ): Promise<InstanceRow | undefined> {
    return this.db
      .updateTable('instances')
      .set({
        ...exitRecorded(c),
        boot_retries: sql`boot_retries + 1`,
      })
      .where('id', '=', id)
      .where('generation', '=', generation)
      .where('status', '=', 'provisioning')
      .where('step', '=', 'done')
      .where('crash_streak', '=', 0)
      .where('deleting_at', 'is', null)
      .returningAll()
      .executeTakeFirst();
  }

  /** A crashed agent is started again: a new generation with its readiness deadline. */
  markRestarted(id: string, generation: number, now: Date, deadline: Date): Promise<InstanceRow | undefined> {
    return this.db
      .updateTable('instances')
      .set({
        step: 'done',
        restarts: sql`restarts + 1`,
        generation: sql`generation + 1`,
        next_restart_at: null,
        started_at: now,
        ready_deadline: deadline,
        updated_at: now,
      })
      .where('id', '=', id)
      .where('generation', '=', generation)
      .returningAll()
      .executeTakeFirst();
  }

  /** An interrupted recreate whose workload runs: done, and watched again from now (the reconciler). */
  async markRecreated(id: string, now: Date, deadline: Date): Promise<void> {
    await this.db.updateTable('instances').set({ step: 'done', started_at: now, ready_deadline: deadline, updated_at: now }).where('id', '=', id).execute();
  }

  /** Its node is back and its workload runs again: provisioning in a new generation, until ready. Returns the generation. */
  async markNodeBack(id: string, now: Date, deadline: Date): Promise<number> {
    const back = await this.db
      .updateTable('instances')
      .set({ status: 'provisioning', failure_reason: null, generation: sql`generation + 1`, started_at: now, ready_deadline: deadline, updated_at: now })
      .where('id', '=', id)
      .returning(['generation'])
      .executeTakeFirstOrThrow();
    return back.generation;
  }

  /** The volume's size as last measured (storage sampler, quota guard). */
  async setStorageBytes(id: string, bytes: number): Promise<void> {
    await this.db.updateTable('instances').set({ storage_bytes: bytes }).where('id', '=', id).execute();
  }

  /** Traffic seen by an edge now: the instances' idle time starts again. Returns how many rows it touched. */
  async recordTraffic(ids: string[]): Promise<number> {
    const r = await this.db.updateTable('instances').set({ traffic_at: sql`now()` }).where('id', 'in', ids).where('deleting_at', 'is', null).executeTakeFirst();
    return Number(r.numUpdatedRows);
  }
}

/** An exit of the agent, recorded, and its start again pending (step backoff) in a new generation. */
function exitRecorded(c: { reason: string; kind: InstanceRow['last_exit_kind']; oomKilled: boolean; exitedAt: Date; next: Date; now: Date }) {
  return {
    step: 'backoff' as const,
    generation: sql<number>`generation + 1`,
    last_exit_reason: c.reason,
    last_exit_kind: c.kind,
    ...(c.oomKilled ? { oom_kills: sql<number>`oom_kills + 1` } : {}),
    last_exit_at: c.exitedAt,
    next_restart_at: c.next,
    updated_at: c.now,
  };
}
