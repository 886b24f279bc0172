import { createHash, randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { AppError, UNLIMITED, validationError, type contracts, type Logger, type TierTable } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow, ProvisionerDB, Step } from '../db/schema.ts';
import { dockerStatus, describe, o, type DockerEngine } from '../docker/engine.ts';
import { lastLines } from '../docker/logs.ts';
import type { Credentials, InstanceRuntime } from './runtime.ts';
import { PORT_LOCK_CLASS, USER_LOCK_CLASS, type OpLocks } from './locks.ts';
import type { Readiness } from './readiness.ts';
import { instanceUrl } from './routes.ts';
import type { StatsSampler } from './stats.ts';
import { crashView } from './healing.ts';
import { settled, timer } from './steps.ts';

type TierName = contracts.TierName;
type View = contracts.provisioner.InstanceView;

export interface InstanceEvents {
  created(p: { instance_id: string; user_id: string; created_at: string }): Promise<void>;
  deleted(p: { instance_id: string; user_id: string; deleted_at: string }): Promise<void>;
}

export interface InstancesDeps {
  db: Kysely<ProvisionerDB>;
  engine: DockerEngine;
  locks: OpLocks;
  config: ProvisionerConfig;
  tiers: TierTable;
  log: Logger;
  scope: string;
  /** keyvault: fresh instance secret + derived key, for each container that is created. */
  issueCredentials(userId: string, instanceId: string): Promise<Credentials>;
  /** keyvault: drop an instance's keys and credentials now (a delete answers only after this). */
  purgeKeys(userId: string, instanceId: string): Promise<void>;
  events: InstanceEvents;
  readiness: Readiness;
  stats: StatsSampler;
  /** Where instances run (containers on one engine, or swarm services). */
  runtime: InstanceRuntime;
  /** The gateway's key-retrieval URL as instances reach it (throws 503 while the instance network is not ready). */
  keysUrl(): string;
  pause(point: string): Promise<void>;
}

const hashToken = (t: string) => createHash('sha256').update(t).digest('hex');
const newToken = () => randomBytes(32).toString('base64url');
const newInstanceId = () => `inst-${randomBytes(10).toString('hex')}`;

/**
 * The instance lifecycle. Docker and the database are kept in step by two rules:
 *  - every operation on an instance holds its operation lock (see locks.ts) and writes how far it got
 *    (`step`) before each Docker change, so the reconciler can finish or undo it after a crash;
 *  - a row exists before any Docker object of its instance and is deleted after the last one, so a
 *    labelled container or volume without a row is always an orphan.
 */
export class Instances {
  private readonly d: InstancesDeps;
  private readonly imageSeen = new Map<string, number>();
  private readonly containers: InstanceRuntime;

  constructor(deps: InstancesDeps) {
    this.d = deps;
    this.containers = deps.runtime;
  }

  // ------------------------------------------------------------------ create

  async create(input: contracts.In<typeof contracts.provisioner.create>): Promise<View & { access_token: string }> {
    const { config, engine, db, log } = this.d;
    // Own properties only: "constructor" or "__proto__" must be an unknown framework, not Object's.
    const repo = Object.hasOwn(config.FRAMEWORK_IMAGES, input.framework) ? config.FRAMEWORK_IMAGES[input.framework] : undefined;
    if (!repo) throw validationError('framework', `must be one of: ${Object.keys(config.FRAMEWORK_IMAGES).join(', ')}`);
    const version = input.version ?? config.DEFAULT_VERSION;
    if (input.subscription_cancelled) throw new AppError('SUBSCRIPTION_CANCELLED');
    const limits = this.d.tiers[input.tier];
    const image = `${repo}:${version}`;
    await this.assertImage(image);
    this.d.keysUrl(); // the instance network must be ready (503 otherwise)

    const id = newInstanceId();
    const name = input.name ?? `${input.framework}-${id.slice(-6)}`;
    const token = newToken();
    const t = timer();
    // keyvault is asked for the credentials while the lock and the lease are taken (they do not depend
    // on each other); a create refused by the lease tells keyvault to forget them again.
    const credsP = this.d.issueCredentials(input.user_id, id);
    credsP.catch(() => {}); // awaited (and handled) below
    const forgetCredentials = () =>
      void credsP.then(() => this.d.events.deleted({ instance_id: id, user_id: input.user_id, deleted_at: new Date().toISOString() })).catch(() => {});
    // The storage check (a read) runs while the operation lock is taken.
    const storageP = this.assertStorage(input.user_id, input.tier, limits.storage_mb);
    storageP.catch(() => {}); // awaited (and handled) below
    let release: () => Promise<void>;
    try {
      release = await this.d.locks.hold(id);
    } catch (err) {
      forgetCredentials();
      throw err;
    }
    try {
      await storageP;
    } catch (err) {
      forgetCredentials();
      await release();
      throw err;
    }
    t.lap('lock');
    try {
      // One statement (see the lease_instance migrations): per-user lock → count → refuse at the limit →
      // port lock → lowest free port → row, committed without waiting for the disk. UNIQUE(port) backs it up.
      let row: InstanceRow;
      try {
        const r = await sql<InstanceRow>`select * from lease_instance(
          ${id}, ${input.user_id}::uuid, ${limits.instances}::int, ${config.PORT_RANGE_START}::int, ${config.PORT_RANGE_END}::int,
          ${USER_LOCK_CLASS}::int, ${PORT_LOCK_CLASS}::int, ${name}, ${input.framework}, ${version}, ${image}, ${input.tier},
          ${limits.memory_mb}::int, ${limits.cpus}::real, ${limits.pids}::int, ${hashToken(token)}, ${input.wallet_address ?? null}::text)`.execute(db);
        row = r.rows[0]!;
      } catch (err) {
        forgetCredentials();
        const code = (err as { code?: string }).code;
        if (code === 'AH001') {
          throw new AppError('INSTANCE_LIMIT_EXCEEDED', `The ${input.tier} tier allows ${limits.instances} instance${limits.instances === 1 ? '' : 's'}`);
        }
        if (code === 'AH002') throw new AppError('PORTS_EXHAUSTED');
        throw err;
      }
      t.lap('lease');
      try {
        await this.d.pause('leased');
        const creds = await credsP;
        t.lap('credentials');
        // The volume and the container (or swarm service); any create step is undone by name after a crash.
        const workload = await this.containers.create(row, token);
        if (workload.host) row.node_host = workload.host;
        t.lap('container');
        await this.d.pause('container');
        // Recording the container and starting it overlap: the reconciler undoes 'leased' and 'container'
        // alike (by name), so the step only has to be written before the create answers.
        await settled(this.containers.start(id, creds), this.setStep(id, 'container', { container_id: workload.runtimeId, node_host: workload.host ?? null }));
        t.lap('start');
        // Probing starts at once; the watcher's transitions are conditional on this generation, so an
        // undo below (which bumps it) silences it.
        const startedAt = new Date();
        const deadline = new Date(startedAt.getTime() + config.READY_TIMEOUT_SECONDS * 1000);
        this.d.readiness.watch({ id, generation: row.generation, port: row.port, host: this.containers.probeHost(row), deadline, startedAt });
        const [created] = await settled(
          this.markStarted(row, row.generation, startedAt, deadline),
          this.d.events.created({ instance_id: id, user_id: input.user_id, created_at: row.created_at.toISOString() }),
        );
        t.lap('record');
        log.info({ instance_id: id, user_id: input.user_id, port: row.port, image, ms: t.laps }, 'instance created');
        await this.d.pause('started');
        return {
          ...this.view(created),
          status: 'provisioning', // as created; the watcher may already have seen it ready
          estimated_ready: new Date(Date.now() + this.d.readiness.estimateSeconds() * 1000).toISOString(),
          access_token: token,
        };
      } catch (err) {
        log.warn({ instance_id: id, err: describe(err) }, 'create failed; rolling back');
        if (err instanceof AppError && err.code === 'DOCKER_UNAVAILABLE') {
          // No more Docker calls in the request: mark it for removal; the reconciler finishes when Docker answers.
          await this.markDeleting(id).catch((e) => log.error({ instance_id: id, err: describe(e) }, 'could not mark a failed create for removal'));
        } else {
          await this.undo(row).catch((e) => log.error({ instance_id: id, err: describe(e) }, 'rollback incomplete; the reconciler will finish it'));
        }
        throw err;
      }
    } finally {
      await release();
    }
  }

  /**
   * A user whose volumes already hold the tier's storage (as last sampled) gets no new instance. While
   * instances run, each volume's hard cap and the quota guard (quota.ts) hold the limit.
   */
  private async assertStorage(userId: string, tier: string, limitMb: number): Promise<void> {
    if (limitMb === UNLIMITED) return;
    const { storage_used_mb } = await this.usage({ user_id: userId });
    if (storage_used_mb >= limitMb) {
      throw new AppError('STORAGE_LIMIT_EXCEEDED', `The ${tier} tier allows ${limitMb} MB of storage and your instances use ${storage_used_mb} MB`);
    }
  }

  /** The image must exist locally (nothing is ever pulled): a wrong version is the caller's error. */
  private async assertImage(image: string): Promise<void> {
    const seen = this.imageSeen.get(image);
    if (seen && Date.now() - seen < 30_000) return this.d.engine.assertUp();
    try {
      await this.d.engine.run('image inspect', (abortSignal) => this.d.engine.docker.getImage(image).inspect(o({ abortSignal })));
      this.imageSeen.set(image, Date.now());
    } catch (err) {
      if (dockerStatus(err) === 404) throw validationError('version', `no image ${image} is available for this framework version`);
      throw err;
    }
  }

  // ------------------------------------------------------------------ read

  async get(input: { user_id: string; instance_id: string }): Promise<View> {
    const row = await this.owned(input.user_id, input.instance_id);
    return this.liveView(row);
  }

  async list(input: { user_id: string }): Promise<{ instances: View[] }> {
    const rows = await this.d.db
      .selectFrom('instances')
      .selectAll()
      .where('user_id', '=', input.user_id)
      .where('deleting_at', 'is', null)
      .orderBy('created_at')
      .execute();
    return { instances: rows.map((r) => this.view(r)) };
  }

  async logs(input: { user_id: string; instance_id: string; tail: number }): Promise<{ instance_id: string; lines: string[] }> {
    await this.owned(input.user_id, input.instance_id);
    const text = await this.containers.logs(input.instance_id, input.tail);
    return { instance_id: input.instance_id, lines: lastLines(text, input.tail) };
  }

  async usage(input: { user_id: string }): Promise<{ instances_active: number; storage_used_mb: number }> {
    const r = await this.d.db
      .selectFrom('instances')
      .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.coalesce(eb.fn.sum<number>('storage_bytes'), sql<number>`0`).as('bytes'), sql<string>`(select coalesce(sum(size_bytes), 0) from backups b where b.user_id = ${input.user_id}::uuid)`.as('backup_bytes')])
      .where('user_id', '=', input.user_id)
      .where('deleting_at', 'is', null)
      .executeTakeFirstOrThrow();
    return { instances_active: Number(r.n), storage_used_mb: Math.round(((Number(r.bytes) + Number(r.backup_bytes)) / (1024 * 1024)) * 100) / 100 };
  }

  // ------------------------------------------------------------------ lifecycle

  /** Recreate the container (fresh credentials, same volume and port) so the agent reloads its keys. */
  async restart(input: { user_id: string; instance_id: string; tier?: TierName | undefined }) {
    return this.recreateOwned(input, ['running', 'provisioning', 'failed'], 'restart');
  }

  async start(input: { user_id: string; instance_id: string; tier?: TierName | undefined }) {
    return this.recreateOwned(input, ['stopped', 'failed'], 'start');
  }

  async stop(input: { user_id: string; instance_id: string }) {
    await this.owned(input.user_id, input.instance_id);
    this.d.engine.assertUp();
    return this.d.locks.with(input.instance_id, async () => {
      const row = await this.owned(input.user_id, input.instance_id);
      if (row.status === 'stopped') throw conflict('stop', row.status);
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
    const live = ['running', 'provisioning'] as const;
    const rows = await this.d.db
      .selectFrom('instances')
      .select('id')
      .where('wallet_address', '=', wallet)
      .where('status', 'in', live)
      .where('deleting_at', 'is', null)
      .execute();
    let stopped = 0;
    for (const { id } of rows) {
      this.d.engine.assertUp();
      await this.d.locks.with(id, async () => {
        const row = await this.d.db.selectFrom('instances').selectAll().where('id', '=', id).executeTakeFirst();
        if (!row || row.deleting_at || !(live as readonly string[]).includes(row.status)) return;
        await this.stopLocked(row);
        stopped++;
      });
    }
    return stopped;
  }

  /** Under the lock: step stopping → docker stop → stopped (or failed with a reason: the quota guard). */
  async stopLocked(row: InstanceRow, failureReason?: string): Promise<void> {
    const { db } = this.d;
    await db
      .updateTable('instances')
      .set({ step: 'stopping', generation: sql`generation + 1`, updated_at: new Date() })
      .where('id', '=', row.id)
      .execute();
    await this.d.pause('stopping');
    await this.containers.stop(row.id);
    const now = new Date();
    await db
      .updateTable('instances')
      .set({ status: failureReason ? 'failed' : 'stopped', step: 'done', failure_reason: failureReason ?? null, crash_streak: 0, last_activity: now, updated_at: now })
      .where('id', '=', row.id)
      .execute();
    this.d.stats.forget(row.id);
  }

  /** Stop an instance's container without changing its row (the readiness watcher, for an agent that never became ready). */
  stopContainer(id: string): Promise<void> {
    return this.containers.stop(id);
  }

  async remove(input: { user_id: string; instance_id: string }): Promise<{ success: boolean; instance_id: string; deleted_at: string }> {
    // A delete that was interrupted (Docker down mid-way) can be retried: deleting rows are found here.
    await this.owned(input.user_id, input.instance_id, true);
    this.d.engine.assertUp();
    return this.d.locks.with(input.instance_id, async () => {
      const row = await this.owned(input.user_id, input.instance_id, true);
      // The keys go first, so none of a deleted instance can be listed or fetched once the delete has
      // answered. If keyvault cannot be reached, the delete fails (503) and nothing else has changed.
      await this.d.purgeKeys(row.user_id, row.id);
      const deletedAt = await this.finishDelete(row);
      return { success: true, instance_id: row.id, deleted_at: deletedAt.toISOString() };
    });
  }

  private async recreateOwned(input: { user_id: string; instance_id: string; tier?: TierName | undefined }, from: string[], verb: string) {
    await this.owned(input.user_id, input.instance_id);
    this.d.engine.assertUp();
    return this.d.locks.with(input.instance_id, async () => {
      const row = await this.owned(input.user_id, input.instance_id);
      if (!from.includes(row.status)) throw conflict(verb, row.status);
      await this.assertImage(row.image);
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
  async recreateLocked(row: InstanceRow, tier?: TierName): Promise<string | undefined> {
    const { db, log } = this.d;
    const creds = await this.d.issueCredentials(row.user_id, row.id);
    let token = await this.containers.token(row.id);
    const minted = token ? undefined : newToken();
    token ??= minted!;
    const limits = tier ? this.d.tiers[tier] : undefined;
    const updated = await db
      .updateTable('instances')
      .set({
        status: 'provisioning',
        step: 'recreating',
        generation: sql`generation + 1`,
        failure_reason: null,
        crash_streak: 0, // a restart by the owner starts the backoff afresh
        next_restart_at: null,
        updated_at: new Date(),
        ...(minted ? { access_token_hash: hashToken(minted) } : {}),
        ...(limits && tier ? { tier, memory_mb: limits.memory_mb, cpus: limits.cpus, pids: limits.pids } : {}),
      })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    this.d.stats.forget(row.id);
    try {
      await this.d.pause('recreating');
      await this.containers.remove(row.id);
      const created = await this.containers.create(updated, token);
      await this.setStep(row.id, 'recreating', { container_id: created.runtimeId, node_host: created.host ?? updated.node_host });
      await this.containers.start(row.id, creds);
      const started = await this.markStarted(updated, updated.generation);
      this.d.readiness.watch({ id: row.id, generation: started.generation, port: row.port, host: this.containers.probeHost(started), deadline: started.ready_deadline!, startedAt: started.started_at! });
      return minted;
    } catch (err) {
      log.warn({ instance_id: row.id, err: describe(err) }, 'recreating the container failed');
      await this.markFailed(row.id, updated.generation, 'The container could not be recreated; restart the instance to retry').catch(() => {});
      throw err;
    }
  }

  // ------------------------------------------------------------------ removal

  /** Undo a create that failed after the lease: everything goes, as for a delete. */
  async undo(row: InstanceRow): Promise<void> {
    await this.finishDelete(row);
  }

  /**
   * Mark the row deleting (it no longer counts and is hidden), then remove container → volume →
   * publish events.instance.deleted (keyvault drops what keys are left; de-duplicated by id) → delete
   * the row, which releases the port last. Idempotent at every step: the reconciler calls it again after a crash.
   */
  async finishDelete(row: InstanceRow): Promise<Date> {
    const deletedAt = await this.markDeleting(row.id);
    this.d.stats.forget(row.id);
    await this.d.pause('deleting');
    await this.containers.remove(row.id);
    await this.d.pause('container_removed');
    await this.containers.removeVolume(row.id, row.node_host);
    await this.d.pause('volume_removed');
    await this.d.events.deleted({ instance_id: row.id, user_id: row.user_id, deleted_at: deletedAt.toISOString() });
    await this.d.db.deleteFrom('instances').where('id', '=', row.id).execute();
    this.d.log.info({ instance_id: row.id, port: row.port }, 'instance deleted');
    return deletedAt;
  }

  /** The row stops counting and is hidden; its port stays leased until its Docker objects are gone. */
  private async markDeleting(id: string): Promise<Date> {
    const marked = await this.d.db
      .updateTable('instances')
      .set({ step: 'deleting', deleting_at: sql`coalesce(deleting_at, now())`, generation: sql`generation + 1`, updated_at: new Date() })
      .where('id', '=', id)
      .returning(['deleting_at'])
      .executeTakeFirst();
    return (marked?.deleting_at as Date | null | undefined) ?? new Date();
  }

  // ------------------------------------------------------------------ helpers

  private async owned(userId: string, instanceId: string, includeDeleting = false): Promise<InstanceRow> {
    let q = this.d.db.selectFrom('instances').selectAll().where('id', '=', instanceId).where('user_id', '=', userId);
    if (!includeDeleting) q = q.where('deleting_at', 'is', null);
    const row = await q.executeTakeFirst();
    if (!row) throw new AppError('INSTANCE_NOT_FOUND');
    return row;
  }

  private async setStep(id: string, step: Step, extra: { container_id?: string; node_host?: string | null } = {}): Promise<void> {
    await this.d.db.updateTable('instances').set({ step, updated_at: new Date(), ...extra }).where('id', '=', id).execute();
  }

  private async markStarted(row: InstanceRow, generation: number, now = new Date(), deadline = new Date(now.getTime() + this.d.config.READY_TIMEOUT_SECONDS * 1000)): Promise<InstanceRow> {
    return this.d.db
      .updateTable('instances')
      .set({ step: 'done', started_at: now, last_activity: now, updated_at: now, ready_deadline: deadline })
      .where('id', '=', row.id)
      .where('generation', '=', generation)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async markFailed(id: string, generation: number, reason: string): Promise<void> {
    const now = new Date();
    await this.d.db
      .updateTable('instances')
      .set({ status: 'failed', step: 'done', failure_reason: reason, crash_streak: 0, last_activity: now, updated_at: now })
      .where('id', '=', id)
      .where('generation', '=', generation)
      .where('deleting_at', 'is', null)
      .execute();
  }

  url(row: Pick<InstanceRow, 'id' | 'port' | 'node_host'>): string {
    return instanceUrl(this.d.config.INSTANCE_URL_TEMPLATE, row);
  }

  view(row: InstanceRow): View {
    const live = row.status === 'running' || row.status === 'provisioning';
    return {
      instance_id: row.id,
      name: row.name,
      status: row.status,
      framework: row.framework,
      version: row.version,
      port: row.port,
      url: this.url(row),
      created_at: row.created_at.toISOString(),
      memory_limit_mb: row.memory_mb,
      last_activity: row.last_activity.toISOString(),
      uptime_seconds: live && row.started_at ? Math.max(0, Math.floor((Date.now() - new Date(row.started_at).getTime()) / 1000)) : 0,
      ...(row.status === 'failed' && row.failure_reason ? { failure_reason: row.failure_reason } : {}),
      ...crashView(row),
    };
  }

  /**
   * The stored view plus what Docker knows now: uptime from the container's StartedAt, CPU and
   * memory from its stats. A running instance whose container has died is marked failed here. When
   * Docker cannot be reached, the stored view is returned without live figures.
   */
  private async liveView(row: InstanceRow): Promise<View> {
    const v = this.view(row);
    const { engine } = this.d;
    if (!(row.status === 'running' || row.status === 'provisioning') || !engine.available) return v;
    try {
      const s = await this.containers.inspect(row.id);
      if (s.state === 'running') {
        if (s.startedAt !== undefined && Number.isFinite(s.startedAt)) v.uptime_seconds = Math.max(0, Math.floor((Date.now() - s.startedAt) / 1000));
        if (row.status === 'running') {
          const live = await this.d.stats.current(row.id);
          if (live) Object.assign(v, live);
        }
      } else if (row.status === 'running' && row.step === 'done' && ((s.state === 'exited' && this.containers.kind !== 'docker') || s.state === 'missing' || s.state === 'node_down')) {
        // (An exited docker container is a crash for the self-healing to restart: healing.ts.)
        const reason = s.state === 'missing' ? 'The instance container is missing; restart the instance' : (s.error ?? `The agent exited with code ${s.exitCode}`);
        await this.markFailed(row.id, row.generation, reason);
        return { ...v, status: 'failed', uptime_seconds: 0, failure_reason: reason };
      }
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      // Docker became unavailable: the stored view.
    }
    return v;
  }
}

const conflict = (verb: string, status: string) => new AppError('INSTANCE_STATE_CONFLICT', `Cannot ${verb} an instance that is ${status}`);
