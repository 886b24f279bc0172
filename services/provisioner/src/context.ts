import { join } from 'node:path';
import type { Kysely } from 'kysely';
import type { NatsConnection } from 'nats';
import { contracts, publishEvent, request, type Logger } from '@agenthost/shared';
import { Backups } from './backups/backups.ts';
import { archiveStore, backupBucket } from './backups/choose-store.ts';
import { BackupScheduler } from './backups/scheduler.ts';
import type { ProvisionerConfig } from './config.ts';
import type { ProvisionerDB } from './db/schema.ts';
import type { Checkpoints } from './docker/checkpoint.ts';
import { DockerEngine } from './docker/engine.ts';
import { ContainerEvents } from './docker/events.ts';
import { CredentialHandoff } from './docker/handoff.ts';
import { DockerInstances } from './docker/runtime.ts';
import { sleepResidentMb } from './docker/swap.ts';
import { QuotaVolumes } from './docker/volumes.ts';
import { InstanceCreator } from './domain/create.ts';
import { DevicePairing } from './domain/devices.ts';
import { faults } from './domain/faults.ts';
import { SelfHealing } from './domain/healing.ts';
import { IdleSleep } from './domain/idle-sleep.ts';
import { LocalImages } from './domain/images.ts';
import { InstanceRepo } from './domain/instance-repo.ts';
import { LiveView } from './domain/instance-view.ts';
import { InstanceLifecycle, type InstanceEvents } from './domain/lifecycle.ts';
import { OpLocks } from './domain/locks.ts';
import { NO_CREDENTIALS, POOL_USER } from './domain/pool-owner.ts';
import { warmPool, type PoolCreate, type WarmPool } from './domain/pool.ts';
import { NetworkGuard } from './domain/network-guard.ts';
import { startedByAReplica } from './domain/own-starts.ts';
import { QuotaGuard } from './domain/quota.ts';
import { Readiness } from './domain/readiness.ts';
import { Reconciler } from './domain/reconciler.ts';
import type { InstanceRuntime } from './domain/runtime.ts';
import { Sleeper } from './domain/sleep.ts';
import { StatsSampler } from './domain/stats.ts';
import { StatusRelay, statusMessage } from './domain/status-relay.ts';
import { StorageSampler } from './domain/storage.ts';
import { InstanceUpgrades } from './domain/upgrades.ts';
import { Drainer } from './swarm/drain.ts';
import { SwarmInstances } from './swarm/runtime.ts';
import { swarmSample } from './swarm/stats.ts';

const P = contracts.provisioner;
export const SCHEMA = 'provisioner';

/** A directory under the host's state directory (AGENTHOST_STATE), where VOLUME_DIR or BACKUP_DIR do not say. */
export const stateDir = (name: string) => join(process.env.AGENTHOST_STATE || '/var/lib/agenthost', name);

export interface ProvisionerDeps {
  config: ProvisionerConfig;
  log: Logger;
  nc: NatsConnection;
  db: Kysely<ProvisionerDB>;
  /** The checkpointed sleep, when this host can (main.ts asks at start: docker/checkpoint.ts). */
  checkpoints?: Checkpoints;
}

/** The composition root: everything the endpoints (endpoints.ts) and the start and stop (main.ts) need. */
export interface ProvisionerContext extends ProvisionerDeps {
  /** The label of every Docker object of this deployment: INSTANCE_SCOPE, else the instance network's name. */
  scope: string;
  engine: DockerEngine;
  /** The operation lock of each instance, shared by every replica (Postgres advisory locks). */
  locks: OpLocks;
  /** The instances table: every query and named transition (domain/instance-repo.ts). */
  repo: InstanceRepo;
  /** Where instances run: containers on one engine (docker/runtime.ts) or swarm services (swarm/runtime.ts). */
  runtime: InstanceRuntime;
  /** Filled at start from the engine's API version: no-new-privileges on swarm services needs API 1.44. */
  extraSecurity: { noNewPrivileges: boolean };
  /** The docker driver's instance bridge and host firewall. */
  network: NetworkGuard;
  /** The size-limited volumes (VOLUME_QUOTA), one file each under VOLUME_DIR/<scope>. */
  volumes: QuotaVolumes;
  stats: StatsSampler;
  storage: StorageSampler;
  statusRelay: StatusRelay;
  /** Credentials by stdin at each container start (docker driver). */
  handoff: CredentialHandoff;
  containerEvents: ContainerEvents;
  readiness: Readiness;
  /** The instance code by job: read side, owner's verbs, create saga, upgrades, sleep and wake. */
  view: LiveView;
  lifecycle: InstanceLifecycle;
  creator: InstanceCreator;
  upgrades: InstanceUpgrades;
  sleeper: Sleeper;
  /** The docker driver's self-healing; undefined on a swarm (the swarm restarts its tasks). */
  healing: SelfHealing | undefined;
  reconciler: Reconciler;
  quota: QuotaGuard;
  idleSleep: IdleSleep;
  devices: DevicePairing;
  backups: Backups;
  backupScheduler: BackupScheduler;
  /** Moves instances off draining swarm nodes; undefined on the docker driver. */
  drainer: Drainer | undefined;
  /** The warm pool of checkpointed agents a create claims (WARM_POOL_JSON); undefined when there is none. */
  pool: WarmPool | undefined;
}

/**
 * Wires the provisioner's parts from its config and connections, each after what it needs (so nothing refers to a
 * part made later). A test passes `overrides` to swap one part and keeps the rest real; an overridden part is not
 * built at all.
 */
export function buildContext(deps: ProvisionerDeps, overrides: Partial<ProvisionerContext> = {}): ProvisionerContext {
  const { config, log, nc, db } = deps;
  const swarm = config.PROVISIONER_DRIVER === 'swarm';
  const tiers = config.TIER_LIMITS_JSON;
  const timeoutMs = config.NATS_REQUEST_TIMEOUT_MS;
  const scope = overrides.scope ?? (config.INSTANCE_SCOPE || config.INSTANCE_NETWORK);
  const engine = overrides.engine ?? new DockerEngine({ host: config.DOCKER_HOST, timeoutMs: config.DOCKER_TIMEOUT_MS, log });
  const locks = overrides.locks ?? new OpLocks(config.DATABASE_URL, SCHEMA);
  const repo = overrides.repo ?? new InstanceRepo(db, config.READY_TIMEOUT_SECONDS);
  const network = overrides.network ?? new NetworkGuard({ config, engine, log, scope });
  const stats = overrides.stats ?? new StatsSampler(engine, config.STATS_INTERVAL_SECONDS, swarm ? swarmSample(engine, nc, timeoutMs) : undefined);
  // One directory per scope: the reconciler removes the files without a row, and only its own.
  const volumeDir = join(config.VOLUME_DIR || stateDir('volumes'), scope);
  const volumes = overrides.volumes ?? new QuotaVolumes({ engine, log, scope, dir: volumeDir, enabled: config.VOLUME_QUOTA === 'enforce' });
  const pause = faults(config.FAULT_PAUSE_AT, log);
  const issueCredentials = async (user_id: string, instance_id: string) =>
    user_id === POOL_USER ? NO_CREDENTIALS : request(nc, contracts.keyvault.issueCredentials, { user_id, instance_id }, { timeoutMs });
  const issueToOwner = async (id: string) => issueCredentials((await repo.byId(id))?.user_id ?? POOL_USER, id);
  const handoff =
    overrides.handoff ?? new CredentialHandoff({ engine, log, issue: issueToOwner, startedByAReplica: startedByAReplica({ repo, locks, engine }) });
  const extraSecurity = overrides.extraSecurity ?? { noNewPrivileges: false };
  // Placement runs one at a time across every provisioner replica (a database lock).
  const placementLock = <T>(fn: () => Promise<T>): Promise<T> => locks.with(`swarm-placement:${scope}`, fn, config.DOCKER_TIMEOUT_MS);
  const gatewayUrl = (host: string) => config.INSTANCE_GATEWAY_URL.replace(/\/+$/, '').replaceAll('{host}', host);
  const runtime =
    overrides.runtime ??
    (swarm
      ? new SwarmInstances({ engine, config, scope, log, keysUrl: (host) => `${gatewayUrl(host)}/keys/retrieve`, extraSecurity, serialize: placementLock })
      : new DockerInstances({ engine, config, scope, keysUrl: () => network.keysUrl(), handoff, volumes, tiers, checkpoints: deps.checkpoints }));
  const readiness =
    overrides.readiness ??
    new Readiness({
      repo,
      engine,
      runtime,
      locks,
      log,
      readyTimeoutSeconds: config.READY_TIMEOUT_SECONDS,
      defaultEstimateSeconds: config.ESTIMATED_READY_SECONDS,
      startsAtOnce: config.STARTS_AT_ONCE,
      startQueueMaxSeconds: config.START_QUEUE_MAX_SECONDS,
    });
  const images = new LocalImages(engine);
  const instanceEvents: InstanceEvents = {
    created: (p) => publishEvent(nc, P.instanceCreated, p, `instance-created-${p.instance_id}`),
    deleted: (p) => publishEvent(nc, P.instanceDeleted, p, `instance-deleted-${p.instance_id}`),
  };
  const purgeKeys = async (user_id: string, instance_id: string) =>
    void (await request(nc, contracts.keyvault.purgeInstance, { user_id, instance_id }, { timeoutMs }));
  const lifecycleDeps = { repo, engine, images, locks, tiers, log, issueCredentials, purgeKeys, events: instanceEvents, readiness, stats, runtime, pause };
  const lifecycle = overrides.lifecycle ?? new InstanceLifecycle(lifecycleDeps);
  const upgrades = overrides.upgrades ?? new InstanceUpgrades({ ...lifecycleDeps, config, lifecycle });
  // An upgrade whose agent is not ready is rolled back rather than failed.
  readiness.onNotReady((id, generation, reason) => upgrades.notReady(id, generation, reason));
  const sleeper = overrides.sleeper ?? new Sleeper({ ...lifecycleDeps, lifecycle, residentMb: sleepResidentMb(config, swarm, log) });
  const healing =
    'healing' in overrides
      ? overrides.healing
      : swarm
        ? undefined
        : new SelfHealing({ repo, runtime, locks, readiness, log, policy: config, issueCredentials });
  // An agent that exits before it is ready is booted again a few times before it fails (healing.ts).
  if (healing) readiness.onBootExit((id, generation) => healing.retryBoot(id, generation));
  const reconciler =
    overrides.reconciler ??
    new Reconciler({
      engine,
      runtime,
      locks,
      repo,
      lifecycle,
      sleeper,
      upgrades,
      readiness,
      // The instance bridge and its host firewall are the docker driver's; swarm instances have their own networks.
      ...(swarm ? {} : { network, healing }),
      volumes,
      scope,
      log,
      intervalSeconds: config.RECONCILE_INTERVAL_SECONDS,
      readyTimeoutSeconds: config.READY_TIMEOUT_SECONDS,
      pause,
    });
  engine.onRecovery(() => void reconciler.trigger());
  const view =
    overrides.view ??
    new LiveView({
      repo,
      engine,
      runtime,
      stats,
      urlTemplate: config.INSTANCE_URL_TEMPLATE,
      // The live view saw a dead workload: the reconciler records it (a read never writes).
      recheck: (id) => void reconciler.recheck(id),
      images,
      frameworkImages: config.FRAMEWORK_IMAGES,
    });
  // On a swarm the URL depends on the node, chosen at create; the gateway URL must be configured.
  const keysUrl = () => (swarm ? gatewayUrl('') : network.keysUrl());
  const checkpoints = 'checkpoints' in runtime && Boolean(runtime.checkpoints);
  const poolDeps = { repo, locks, images, sleeper, lifecycle, tiers, dockerUp: () => engine.available, create: (i: PoolCreate) => creator.create(i) };
  const pool: WarmPool | undefined = 'pool' in overrides ? overrides.pool : warmPool({ config, swarm, checkpoints, log }, poolDeps);
  const creator: InstanceCreator = overrides.creator ?? new InstanceCreator({ ...lifecycleDeps, config, lifecycle, view, keysUrl, ...(pool ? { pool } : {}) });
  const backups =
    overrides.backups ??
    new Backups({
      db,
      runtime,
      locks,
      repo,
      view,
      creator,
      lifecycle,
      tiers,
      log,
      masterKey: config.BACKUP_KEY ? Buffer.from(config.BACKUP_KEY, 'base64') : undefined,
      store: archiveStore({ dir: config.BACKUP_DIR || stateDir('backups'), scope, s3: backupBucket(config) }),
      published: (e) => publishEvent(nc, P.instanceBackup, e, `instance-backup-${e.backup_id}`),
    });
  return {
    ...deps,
    scope,
    engine,
    locks,
    repo,
    runtime,
    extraSecurity,
    network,
    volumes,
    stats,
    storage:
      overrides.storage ??
      new StorageSampler({ repo, engine, scope, log, intervalSeconds: config.STORAGE_SAMPLE_INTERVAL_SECONDS, capped: (id) => volumes.has(id) }),
    statusRelay:
      overrides.statusRelay ??
      new StatusRelay({
        db,
        databaseUrl: config.DATABASE_URL,
        schema: SCHEMA,
        log,
        publish: (e) => publishEvent(nc, P.instanceStatusChanged, statusMessage(e), `instance-status-${e.instance_id}-${e.seq}`),
      }),
    handoff,
    containerEvents: overrides.containerEvents ?? new ContainerEvents({ engine, log, scope, onResumed: () => void reconciler.trigger() }),
    readiness,
    view,
    lifecycle,
    creator,
    upgrades,
    sleeper,
    healing,
    reconciler,
    quota:
      overrides.quota ??
      new QuotaGuard({
        repo,
        volumes,
        dockerUp: () => engine.available,
        locks,
        lifecycle,
        tiers,
        log,
        intervalSeconds: config.QUOTA_CHECK_INTERVAL_SECONDS,
        graceSeconds: config.QUOTA_GRACE_SECONDS,
      }),
    idleSleep:
      overrides.idleSleep ??
      new IdleSleep({
        repo,
        locks,
        sleeper,
        dockerUp: () => engine.available,
        idleSeconds: config.SLEEP_AFTER_IDLE_SECONDS_JSON,
        deepIdleSeconds: config.DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON,
        intervalSeconds: config.SLEEP_CHECK_INTERVAL_SECONDS,
        log,
      }),
    devices: overrides.devices ?? new DevicePairing({ repo, engine, runtime, log }),
    backups,
    pool,
    backupScheduler:
      overrides.backupScheduler ?? new BackupScheduler({ repo, backups, locks, tiers, log, scope, intervalSeconds: config.BACKUP_SCHEDULE_SECONDS }),
    drainer:
      'drainer' in overrides
        ? overrides.drainer
        : runtime instanceof SwarmInstances
          ? new Drainer({ engine, runtime, locks, repo, lifecycle, config, scope, log, serialize: placementLock })
          : undefined,
  };
}
