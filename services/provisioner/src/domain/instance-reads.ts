import { sql, type Kysely } from 'kysely';
import type { InstanceRow, ProvisionerDB } from '../db/schema.ts';
import { POOL_USER } from './pool-owner.ts';

/**
 * Every read of the instances table, one named query each (the transitions are instance-repo.ts). Nothing here
 * writes, so the doctor (read-only) and the metrics can use it alone.
 */
export class InstanceReads {
  protected readonly db: Kysely<ProvisionerDB>;

  constructor(db: Kysely<ProvisionerDB>) {
    this.db = db;
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

  async exists(id: string): Promise<boolean> {
    return (await this.db.selectFrom('instances').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
  }

  /** Every row, deleting ones too (the reconciler and the doctor compare them with what Docker holds). */
  all(): Promise<InstanceRow[]> {
    return this.db.selectFrom('instances').selectAll().execute();
  }

  /** Every row that is not being deleted. */
  allNotDeleting(): Promise<InstanceRow[]> {
    return this.db.selectFrom('instances').selectAll().where('deleting_at', 'is', null).execute();
  }

  listOwned(userId: string): Promise<InstanceRow[]> {
    return this.db.selectFrom('instances').selectAll().where('user_id', '=', userId).where('deleting_at', 'is', null).orderBy('created_at').execute();
  }

  /** How far the instance's operation got, and whether it is being deleted. */
  stepOf(id: string): Promise<Pick<InstanceRow, 'step' | 'deleting_at'> | undefined> {
    return this.db.selectFrom('instances').select(['step', 'deleting_at']).where('id', '=', id).executeTakeFirst();
  }

  /** What a readiness watcher checks is still its own: the status, generation and deletion. */
  watchState(id: string): Promise<Pick<InstanceRow, 'status' | 'generation' | 'deleting_at'> | undefined> {
    return this.db.selectFrom('instances').select(['status', 'generation', 'deleting_at']).where('id', '=', id).executeTakeFirst();
  }

  async startedAt(id: string): Promise<Date | null | undefined> {
    return (await this.db.selectFrom('instances').select('started_at').where('id', '=', id).executeTakeFirst())?.started_at;
  }

  async cpus(id: string): Promise<number | undefined> {
    return (await this.db.selectFrom('instances').select('cpus').where('id', '=', id).executeTakeFirst())?.cpus;
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

  /** The user of some instance of the wallet, deleting or not (undefined: the wallet has none). */
  async ownerOfWallet(wallet: string): Promise<string | undefined> {
    return (await this.db.selectFrom('instances').select('user_id').where('wallet_address', '=', wallet).executeTakeFirst())?.user_id;
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

  /** The edge's route table (routes.ts): every instance not being deleted, or the one asked for. */
  routes(instanceId?: string) {
    // The warm pool's agents are nobody's yet: no edge routes to them (domain/pool-owner.ts).
    let q = this.db
      .selectFrom('instances')
      .select(['id', 'status', 'step', 'port', 'node_host', 'access_token_hash'])
      .where('deleting_at', 'is', null)
      .where('user_id', '<>', POOL_USER);
    if (instanceId) q = q.where('id', '=', instanceId);
    return q.orderBy('id').execute();
  }

  /**
   * Instances of the tier with no traffic and no start within `seconds` (one of them when `id` is given) that may
   * sleep at this depth: running ones, and for a deep sleep lightly sleeping ones too.
   */
  idle(tier: string, seconds: number, depth: 'light' | 'deep', id?: string): Promise<InstanceRow[]> {
    const since = sql<Date>`now() - make_interval(secs => ${seconds})`;
    let q = this.db
      .selectFrom('instances')
      .selectAll()
      .where('tier', '=', tier)
      .where((eb) =>
        depth === 'light'
          ? eb('status', '=', 'running')
          : eb.or([eb('status', '=', 'running'), eb.and([eb('status', '=', 'sleeping'), eb('sleep_depth', 'in', ['frozen', 'swapped'])])]),
      )
      .where('step', '=', 'done')
      .where('deleting_at', 'is', null)
      .where((eb) => eb.or([eb('upgrade_state', 'is', null), eb('upgrade_state', '!=', 'upgrading')]))
      .where((eb) => eb.or([eb('started_at', 'is', null), eb('started_at', '<', since)]))
      .where((eb) => eb.or([eb('traffic_at', 'is', null), eb('traffic_at', '<', since)]));
    if (id) q = q.where('id', '=', id);
    return q.limit(id ? 1 : 500).execute();
  }

  /** The settled instances (no operation under way) on a swarm node, for the drainer. */
  settledOnNode(nodeHost: string): Promise<InstanceRow[]> {
    return this.db.selectFrom('instances').selectAll().where('node_host', '=', nodeHost).where('deleting_at', 'is', null).where('step', '=', 'done').execute();
  }

  /** Instances that may be backed up (running, stopped or asleep) with no scheduled backup newer than `due`. */
  dueForBackup(due: Date): Promise<Pick<InstanceRow, 'id' | 'user_id' | 'tier'>[]> {
    return this.db
      .selectFrom('instances as i')
      .select(['i.id', 'i.user_id', 'i.tier'])
      .where('i.deleting_at', 'is', null)
      .where('i.user_id', '<>', POOL_USER)
      .where('i.status', 'in', ['running', 'stopped', 'sleeping'])
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('backups as b').select('b.id').whereRef('b.instance_id', '=', 'i.id').where('b.kind', '=', 'scheduled').where('b.created_at', '>', due),
          ),
        ),
      )
      .execute();
  }

  /** How many instances are in each status (the agenthost_instances gauge). */
  async countByStatus(): Promise<{ status: string; n: number }[]> {
    return (await sql<{ status: string; n: number }>`select status, count(*)::int as n from instances group by status`.execute(this.db)).rows;
  }
}
