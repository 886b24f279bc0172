import { AppError, UNLIMITED, validationError, type contracts } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow } from '../db/schema.ts';
import { describe } from '../docker/call.ts';
import { hashToken } from '@agenthost/shared';
import { newInstanceId, newToken } from './access-token.ts';
import { instanceView, type LiveView } from './instance-view.ts';
import { claimFromPool, limitError } from './pool-claim.ts';
import { pooled } from './pool-owner.ts';
import type { InstanceLifecycle, LifecycleDeps } from './lifecycle.ts';
import type { Credentials } from './runtime.ts';
import { settled, timer } from './steps.ts';

type View = contracts.provisioner.InstanceView;

export type CreateDeps = Pick<
  LifecycleDeps,
  'repo' | 'images' | 'locks' | 'tiers' | 'log' | 'issueCredentials' | 'events' | 'readiness' | 'runtime' | 'pause'
> & {
  lifecycle: InstanceLifecycle;
  view: LiveView;
  config: ProvisionerConfig;
  /** The gateway's key-retrieval URL as instances reach it (throws 503 while the instance network is not ready). */
  keysUrl(): string;
  /** The warm pool (pool.ts), where one is configured: which creates it serves, and a claim's call for a refill. */
  pool?: { serves(framework: string, tier: string): boolean; claimed(): void };
};

/**
 * The create saga: lease a row and port, create and start the workload, watch it get ready. A failure after the
 * lease undoes everything (lifecycle.undo), or leaves it to the reconciler when Docker cannot be reached.
 */
export class InstanceCreator {
  private readonly deps: CreateDeps;

  constructor(deps: CreateDeps) {
    this.deps = deps;
  }

  async create(input: contracts.In<typeof contracts.provisioner.create>): Promise<View & { access_token: string }> {
    const { config, log, repo } = this.deps;
    // Own properties only: "constructor" or "__proto__" must be an unknown framework, not Object's.
    const imageRepo = Object.hasOwn(config.FRAMEWORK_IMAGES, input.framework) ? config.FRAMEWORK_IMAGES[input.framework] : undefined;
    if (!imageRepo) throw validationError('framework', `must be one of: ${Object.keys(config.FRAMEWORK_IMAGES).join(', ')}`);
    const version = input.version ?? config.DEFAULT_VERSION;
    if (input.subscription_cancelled) throw new AppError('SUBSCRIPTION_CANCELLED');
    const limits = this.deps.tiers[input.tier];
    const image = `${imageRepo}:${version}`;
    // Pinned: the instance runs the image the version names now, whatever the tag names later (docs/decisions/0026-pinned-images-and-upgrades.md).
    const digest = await this.deps.images.resolve(image);
    this.deps.keysUrl(); // the instance network must be ready (503 otherwise)
    // A warm pool agent is nobody's: no storage to check, no instance limit, no event (pool-owner.ts).
    const forPool = pooled(input);
    if (!forPool) {
      await this.assertStorage(input.user_id, input.tier, limits.storage_mb);
      const claimed = await claimFromPool(this.deps, input, { version, digest, limits });
      if (claimed) return claimed;
    }

    const id = newInstanceId();
    const name = input.name ?? `${input.framework}-${id.slice(-6)}`;
    const token = newToken();
    const t = timer();
    const release = await this.deps.locks.hold(id);
    t.lap('lock');
    try {
      let row: InstanceRow;
      try {
        row = await repo.lease({
          id,
          userId: input.user_id,
          maxInstances: forPool ? UNLIMITED : limits.instances,
          portStart: config.PORT_RANGE_START,
          portEnd: config.PORT_RANGE_END,
          name,
          framework: input.framework,
          version,
          image,
          tier: input.tier,
          memoryMb: limits.memory_mb,
          cpus: limits.cpus,
          pids: limits.pids,
          tokenHash: hashToken(token),
          wallet: input.wallet_address ?? null,
        });
      } catch (err) {
        if ((err as { code?: string }).code === 'AH002') throw new AppError('PORTS_EXHAUSTED');
        throw limitError(err, input.tier, limits.instances);
      }
      t.lap('lease');
      // Credentials only for a leased instance: a refused create asks keyvault for nothing, so there is nothing
      // to forget, and every credential has a row until keyvault has purged it (the undo, retried by the
      // reconciler: docs/decisions/0053-a-refused-create-purges-its-keys.md). Issued while the workload is created.
      const credsP = this.deps.issueCredentials(input.user_id, id);
      credsP.catch(() => {}); // awaited (and handled) in launch and below
      try {
        row.image_digest = digest;
        return await this.launch(row, input.user_id, token, credsP, t);
      } catch (err) {
        log.warn({ instance_id: id, err: describe(err) }, 'create failed; rolling back');
        if (err instanceof AppError && err.code === 'DOCKER_UNAVAILABLE') {
          // No more Docker calls in the request: mark it for removal; the reconciler finishes when Docker answers
          // (and purges the credentials then).
          await repo.markDeleting(id).catch((e) => log.error({ instance_id: id, err: describe(e) }, 'could not mark a failed create for removal'));
        } else {
          // Settled first, so the purge cannot overtake the issue it undoes.
          const credentialsIssued = await credsP.then(() => true, mayHaveIssued);
          await this.deps.lifecycle
            .undo(row, { credentialsIssued })
            .catch((e) => log.error({ instance_id: id, err: describe(e) }, 'rollback incomplete; the reconciler will finish it'));
        }
        throw err;
      }
    } finally {
      await release();
    }
  }

  /** After the lease: the workload is created and started, and its readiness watched. */
  private async launch(
    row: InstanceRow,
    userId: string,
    token: string,
    credsP: Promise<Credentials>,
    t: ReturnType<typeof timer>,
  ): Promise<View & { access_token: string }> {
    const { config, repo, runtime } = this.deps;
    const id = row.id;
    await this.deps.pause('leased');
    // The volume and the container (or swarm service); any create step is undone by name after a crash.
    const workload = await runtime.create(row, token);
    if (workload.host) row.node_host = workload.host;
    t.lap('container');
    const creds = await credsP; // asked for before the container was made, needed only to start it
    t.lap('credentials');
    await this.deps.pause('container');
    // Recording the container and starting it overlap: the reconciler undoes 'leased' and 'container'
    // alike (by name), so the step only has to be written before the create answers.
    const { startedAt, deadline } = await this.deps.readiness.staggered(async () => {
      await settled(
        runtime.start(id, creds),
        repo.setStep(id, 'container', { container_id: workload.runtimeId, node_host: workload.host ?? null, image_digest: row.image_digest }),
      );
      t.lap('start');
      // Probing starts at once; the watcher's transitions are conditional on this generation, so an
      // undo (which bumps it) silences it.
      const startedAt = new Date();
      const deadline = new Date(startedAt.getTime() + config.READY_TIMEOUT_SECONDS * 1000);
      this.deps.readiness.watch({ id, generation: row.generation, port: row.port, host: runtime.probeHost(row), deadline, startedAt });
      return { startedAt, deadline };
    });
    // The row says it started before its user is told it exists: a row without started_at was never announced,
    // so undoing it publishes no events.instance.deleted (lifecycle.ts, finishDelete).
    const created = await repo.markStarted(id, row.generation, startedAt, deadline);
    row.started_at = created.started_at;
    if (!pooled(row)) await this.deps.events.created({ instance_id: id, user_id: userId, created_at: row.created_at.toISOString() });
    t.lap('record');
    this.deps.log.info({ instance_id: id, user_id: userId, port: row.port, image: row.image, ms: t.laps }, 'instance created');
    await this.deps.pause('started');
    return {
      ...instanceView(created, config.INSTANCE_URL_TEMPLATE),
      status: 'provisioning', // as created; the watcher may already have seen it ready
      estimated_ready: new Date(Date.now() + this.deps.readiness.estimateSeconds() * 1000).toISOString(),
      access_token: token,
    };
  }

  /**
   * A user whose volumes already hold the tier's storage (as last sampled) gets no new instance. While
   * instances run, each volume's hard cap and the quota guard (quota.ts) hold the limit.
   */
  private async assertStorage(userId: string, tier: string, limitMb: number): Promise<void> {
    if (limitMb === UNLIMITED) return;
    const { storage_used_mb } = await this.deps.view.usage({ user_id: userId });
    if (storage_used_mb >= limitMb) {
      throw new AppError('STORAGE_LIMIT_EXCEEDED', `The ${tier} tier allows ${limitMb} MB of storage and your instances use ${storage_used_mb} MB`);
    }
  }
}

/**
 * Whether keyvault may hold credentials after an issue that failed: one that got no answer in time (a timeout, a
 * lost connection) may have been made; an answer (an error) or no keyvault running at all (no responders) made none.
 */
function mayHaveIssued(err: unknown): boolean {
  return err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE' && err.details?.notRunning !== true;
}
