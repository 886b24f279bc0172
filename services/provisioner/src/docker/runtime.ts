import { availableParallelism } from 'node:os';
import { UNLIMITED, type contracts, type TierTable } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow } from '../db/schema.ts';
import type { DockerEngine } from './engine.ts';
import { dockerStatus, ignoreGone, o } from './call.ts';
import { containerCheckpoints, type Checkpoints } from './checkpoint.ts';
import { awaited, freezeContainer, swapOutStep, thawContainer } from './freeze.ts';
import type { CredentialHandoff } from './handoff.ts';
import { demux } from './logs.ts';
import { AGENT_PORT, containerName, containerSpec, LABEL_INSTANCE, LABEL_SCOPE, TOKEN_ENV } from './spec.ts';
import type { QuotaVolumes } from './volumes.ts';
import { exportVolume, importVolume, removeRestoreHelper } from './volume-archive.ts';
import type { Credentials, InstanceCheckpoints, InstanceRuntime, ManagedObject, RuntimeState } from '../domain/runtime.ts';
import { instanceUrl } from '../domain/routes.ts';
import { pooled } from '../domain/pool-owner.ts';

type TierName = contracts.TierName;

/** The CPUs an agent boots with: its tier's share, or the burst (BOOT_CPUS, at most the host's CPUs) when that is more. */
const bootCpus = (tierCpus: number, burst: number): number => Math.max(tierCpus, Math.min(burst, availableParallelism()));

/** The `docker` driver: an instance is a container and a volume on one engine, by name (every call bounded by the engine). */
export class DockerInstances implements InstanceRuntime {
  readonly kind = 'docker' as const;
  private readonly deps: {
    engine: DockerEngine;
    config: ProvisionerConfig;
    scope: string;
    keysUrl(): string;
    handoff: CredentialHandoff;
    volumes: QuotaVolumes;
    tiers: TierTable;
    /** The checkpointed sleep, where this host can (docker/checkpoint.ts). */
    checkpoints?: Checkpoints;
  };
  readonly checkpoints?: InstanceCheckpoints;

  constructor(deps: DockerInstances['deps']) {
    this.deps = deps;
    if (deps.checkpoints) this.checkpoints = containerCheckpoints(deps.engine, deps.checkpoints, (cpus) => bootCpus(cpus, deps.config.BOOT_CPUS));
  }

  /** A checkpoint image is of processes that ended with any other step on the container: it goes with them. */
  private async dropCheckpoint(id: string): Promise<void> {
    await this.checkpoints?.drop(id);
  }

  /** What a checkpointable container needs of its image: the entrypoint and command hold-init runs. */
  private async checkpointParts(image: string): Promise<Parameters<typeof containerSpec>[0]['checkpoint']> {
    const { engine, checkpoints } = this.deps;
    if (!checkpoints) return undefined;
    const info = await engine.run(
      'image inspect',
      (abortSignal) =>
        engine.docker.getImage(image).inspect(o({ abortSignal })) as Promise<{ Config: { Entrypoint?: string[] | null; Cmd?: string[] | null } }>,
    );
    return { ...checkpoints.container, entrypoint: info.Config.Entrypoint ?? [], cmd: info.Config.Cmd ?? [] };
  }

  /** The hardened container (and its volume, in the same call) of an instance; its credentials come at start, on stdin. */
  async create(row: InstanceRow, token: string): Promise<{ runtimeId: string }> {
    const { config, engine, scope } = this.deps;
    // The size-limited volume first (with VOLUME_QUOTA=off Docker makes a plain one with the container).
    await this.ensureVolume(row);
    await this.dropCheckpoint(row.id);
    // Pinned: the image ID recorded at create or upgrade, never the moving tag (rows made before pinning: the tag).
    const image = row.image_digest ?? row.image;
    const checkpoint = await this.checkpointParts(image);
    const spec = containerSpec({
      instanceId: row.id,
      userId: row.user_id,
      scope,
      image,
      ...(checkpoint ? { checkpoint } : {}),
      network: config.INSTANCE_NETWORK,
      publishHost: config.PUBLISH_HOST,
      port: row.port,
      memoryMb: row.memory_mb,
      cpus: bootCpus(row.cpus, config.BOOT_CPUS),
      pids: row.pids,
      tmpfsMb: config.TMPFS_SIZE_MB,
      stopTimeoutSeconds: config.STOP_TIMEOUT_SECONDS,
      env: {
        ...config.INSTANCE_EXTRA_ENV_JSON,
        AGENTHOST_INSTANCE_ID: row.id,
        // Its public address: the agent allows its browser UI from there (OpenClaw's allowed origins).
        AGENTHOST_PUBLIC_URL: instanceUrl(config.INSTANCE_URL_TEMPLATE, row),
        // A warm pool agent's credentials come when a create claims it: its bootstrap starts the agent without them.
        AGENTHOST_CREDENTIALS: pooled(row) ? 'stdin-late' : 'stdin',
        AGENTHOST_KEYS_URL: this.deps.keysUrl(),
        ...(config.KEYS_HOT_RELOAD === 'on' ? { AGENTHOST_KEYS_WATCH: '1' } : {}),
        [TOKEN_ENV]: token,
      },
    });
    const { name, ...body } = spec;
    // _query/_body: dockerode would otherwise put the whole spec (with the credentials) in the URL.
    const c = await engine.run('container create', (abortSignal) => engine.docker.createContainer(o({ _query: { name }, _body: body, abortSignal })));
    return { runtimeId: c.id };
  }

  /** The size-limited volume of the instance (with VOLUME_QUOTA=off, Docker makes a plain one with the first container). */
  private ensureVolume(row: InstanceRow): Promise<void> {
    const storageMb = this.deps.tiers[row.tier as TierName]?.storage_mb ?? UNLIMITED;
    return this.deps.volumes.ensure({ instanceId: row.id, userId: row.user_id }, storageMb === UNLIMITED ? this.deps.config.VOLUME_UNLIMITED_MB : storageMb);
  }

  exportData(id: string, sink: (tar: NodeJS.ReadableStream) => Promise<void>): Promise<void> {
    return exportVolume(this.deps.engine, id, sink);
  }

  async importData(row: InstanceRow, tar: NodeJS.ReadableStream): Promise<void> {
    await this.dropCheckpoint(row.id);
    await this.ensureVolume(row);
    await importVolume(this.deps.engine, { instanceId: row.id, userId: row.user_id, scope: this.deps.scope, image: row.image }, tar);
  }

  /** Start the container and hand it its credentials on stdin (a container already running gets none). */
  async start(id: string, creds: Credentials): Promise<void> {
    const { engine, handoff } = this.deps;
    await this.dropCheckpoint(id);
    handoff.expectStart(id);
    try {
      await engine.run('container start', (abortSignal) => engine.docker.getContainer(containerName(id)).start(o({ abortSignal })));
    } catch (err) {
      if (dockerStatus(err) === 304) return;
      throw err;
    }
    await handoff.give(id, creds);
  }

  /** Hand credentials to the running agent's bootstrap (a claimed warm pool agent's, which waits for them). */
  handOver(id: string, creds: Credentials): Promise<void> {
    return this.deps.handoff.give(id, creds);
  }

  /** The gateway token the running container was given, if the container is still there. */
  async token(id: string): Promise<string | undefined> {
    const { engine } = this.deps;
    const info = await ignoreGone(engine.run('container inspect', (abortSignal) => engine.docker.getContainer(containerName(id)).inspect({ abortSignal })));
    const entry = info?.Config?.Env?.find((e) => e.startsWith(`${TOKEN_ENV}=`));
    return entry ? entry.slice(TOKEN_ENV.length + 1) : undefined;
  }

  /** Stop the agent (SIGTERM, then SIGKILL after STOP_TIMEOUT_SECONDS); a missing or stopped container is fine. */
  async stop(id: string): Promise<void> {
    const { engine, config } = this.deps;
    await this.dropCheckpoint(id);
    await ignoreGone(
      engine.run(
        'container stop',
        (abortSignal) => engine.docker.getContainer(containerName(id)).stop(o({ t: config.STOP_TIMEOUT_SECONDS, abortSignal })),
        config.DOCKER_TIMEOUT_MS + config.STOP_TIMEOUT_SECONDS * 1000,
      ),
    );
  }

  freeze(id: string): Promise<void> {
    return freezeContainer(this.deps.engine, id);
  }

  swapOut(id: string, opts: { memoryMb: number; residentMb: number; stepMb: number }): Promise<'more' | 'done' | 'refused' | 'awake'> {
    return swapOutStep(this.deps.engine, id, opts);
  }

  thaw(id: string, memoryMb: number): Promise<void> {
    return thawContainer(this.deps.engine, id, memoryMb);
  }

  async clampCpus(id: string, cpus: number): Promise<void> {
    if (bootCpus(cpus, this.deps.config.BOOT_CPUS) === cpus) return;
    await this.deps.engine.updateLimits(id, { NanoCpus: Math.round(cpus * 1e9) });
  }

  awaited(id: string): Promise<boolean> {
    return awaited(this.deps.engine, id, AGENT_PORT);
  }

  async remove(id: string): Promise<void> {
    const { engine } = this.deps;
    await this.dropCheckpoint(id);
    await ignoreGone(
      engine.run('container remove', (abortSignal) => engine.docker.getContainer(containerName(id)).remove(o({ force: true, v: true, abortSignal }))),
    );
  }

  async removeVolume(id: string): Promise<void> {
    await removeRestoreHelper(this.deps.engine, id);
    await this.deps.volumes.remove(id);
  }

  async inspect(id: string): Promise<RuntimeState> {
    const { engine } = this.deps;
    try {
      const info = await engine.run('container inspect', (abortSignal) => engine.docker.getContainer(containerName(id)).inspect({ abortSignal }));
      const s = info.State;
      if (s.Running) return { state: 'running', startedAt: Date.parse(s.StartedAt), ...(s.Paused ? { paused: true } : {}) };
      // Between the restarts of a crashing agent the engine reports the last exit code: the readiness watcher names
      // it if the agent is still crashing at its deadline (a slow engine may not finish the retries by then).
      if (s.Restarting || s.Status === 'restarting') return { state: 'starting', ...(s.ExitCode ? { exitCode: s.ExitCode } : {}) };
      if (s.Status === 'created') return { state: 'created' };
      const finishedAt = Date.parse(s.FinishedAt);
      return { state: 'exited', exitCode: s.ExitCode, oomKilled: s.OOMKilled, ...(Number.isFinite(finishedAt) ? { finishedAt } : {}) };
    } catch (err) {
      if (dockerStatus(err) === 404) return { state: 'missing' };
      throw err;
    }
  }

  async logs(id: string, tail: number): Promise<string> {
    const { engine } = this.deps;
    const raw = await ignoreGone(
      engine.run('container logs', (abortSignal) =>
        engine.docker.getContainer(containerName(id)).logs(o({ stdout: true, stderr: true, follow: false, tail, abortSignal })),
      ),
    );
    return raw === undefined ? '' : Buffer.isBuffer(raw) ? demux(raw) : typeof raw === 'string' ? raw : JSON.stringify(raw);
  }

  async followLogs(id: string, from: { since?: string; tail?: number }): Promise<NodeJS.ReadableStream | undefined> {
    const { engine } = this.deps;
    const opts = { stdout: true, stderr: true, follow: true, timestamps: true, ...(from.since ? { since: from.since } : { tail: from.tail ?? 200 }) };
    return ignoreGone(
      engine.run('container logs follow', (abortSignal) => engine.docker.getContainer(containerName(id)).logs(o({ ...opts, abortSignal }))),
    ) as Promise<NodeJS.ReadableStream | undefined>;
  }

  async managed(): Promise<ManagedObject[]> {
    const { engine, scope } = this.deps;
    const filters = { label: [`${LABEL_SCOPE}=${scope}`] };
    const containers = await engine.run('container list', (abortSignal) => engine.docker.listContainers(o({ all: true, filters, abortSignal })));
    const volumes = (await engine.run('volume list', (abortSignal) => engine.docker.listVolumes(o({ filters, abortSignal })))).Volumes ?? [];
    const out: ManagedObject[] = [];
    for (const c of containers) {
      const instanceId = c.Labels?.[LABEL_INSTANCE];
      if (instanceId)
        out.push({
          instanceId,
          kind: 'container',
          remove: async () =>
            void (await ignoreGone(
              engine.run('container remove', (abortSignal) => engine.docker.getContainer(c.Id).remove(o({ force: true, v: true, abortSignal }))),
            )),
        });
    }
    // Volumes after containers: a volume is removable only once its container is gone.
    for (const v of volumes) {
      const instanceId = v.Labels?.[LABEL_INSTANCE];
      if (instanceId)
        out.push({
          instanceId,
          kind: 'volume',
          remove: async () =>
            void (await ignoreGone(engine.run('volume remove', (abortSignal) => engine.docker.getVolume(v.Name).remove(o({ force: true, abortSignal }))))),
        });
    }
    for (const instanceId of await this.deps.volumes.ids()) out.push({ instanceId, kind: 'volume file', remove: () => this.deps.volumes.remove(instanceId) });
    for (const instanceId of (await this.deps.checkpoints?.ids()) ?? [])
      out.push({ instanceId, kind: 'checkpoint image', remove: () => this.dropCheckpoint(instanceId) });
    return out;
  }

  probeHost(): string {
    const host = this.deps.config.PUBLISH_HOST;
    return host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  }
}
