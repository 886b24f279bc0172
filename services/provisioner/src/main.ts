import { join } from 'node:path';
import { contracts, endpoint, ensureEventStream, publishEvent, request, runService, type Subscription } from '@agenthost/shared';
import { provisionerConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';
import type { ProvisionerDB } from './db/schema.ts';
import { apiAtLeast, describe, DockerEngine } from './docker/engine.ts';
import { ContainerEvents } from './docker/events.ts';
import { CredentialHandoff } from './docker/handoff.ts';
import { startedByAReplica } from './domain/own-starts.ts';
import { faults } from './domain/faults.ts';
import { SelfHealing } from './domain/healing.ts';
import { buildInstances } from './domain/instances.ts';
import { DevicePairing } from './domain/devices.ts';
import { listRoutes } from './domain/routes.ts';
import { IdleSleep } from './domain/idle-sleep.ts';
import { OpLocks } from './domain/locks.ts';
import { NetworkGuard } from './domain/network-guard.ts';
import { Readiness } from './domain/readiness.ts';
import { StatusRelay, statusMessage } from './domain/status-relay.ts';
import { Reconciler } from './domain/reconciler.ts';
import { StatsSampler } from './domain/stats.ts';
import { StorageSampler } from './domain/storage.ts';
import { QuotaGuard } from './domain/quota.ts';
import { QuotaVolumes } from './docker/volumes.ts';
import { sleepResidentMb } from './docker/swap.ts';
import { InstanceContainers } from './domain/containers.ts';
import type { InstanceRuntime } from './domain/runtime.ts';
import { swarmSample } from './swarm/stats.ts';
import { SwarmInstances } from './swarm/runtime.ts';
import { Drainer } from './swarm/drain.ts';
import { Backups } from './backups/backups.ts';
import { BackupScheduler } from './backups/scheduler.ts';
import { archiveStore, backupBucket } from './backups/choose-store.ts';
import { instancesByState, observeContainerEvent, swarmCapacity } from './metrics.ts';
import { nodeRoom } from './swarm/placement.ts';
import { stopEndedSubscriptions } from './domain/subscription-ends.ts';

const P = contracts.provisioner;
const D = contracts.devices;
const SCHEMA = 'provisioner';

await runService<typeof provisionerConfig, ProvisionerDB>({
  name: 'provisioner',
  version: '1.0.0',
  config: provisionerConfig,
  db: { schema: SCHEMA, migrations },
  async build({ config, db, nc, log }) {
    const scope = config.INSTANCE_SCOPE || config.INSTANCE_NETWORK;
    const engine = new DockerEngine({ host: config.DOCKER_HOST, timeoutMs: config.DOCKER_TIMEOUT_MS, log });
    const locks = new OpLocks(config.DATABASE_URL, SCHEMA);
    const network = new NetworkGuard({ config, engine, log, scope });
    const stats = new StatsSampler(
      engine,
      config.STATS_INTERVAL_SECONDS,
      config.PROVISIONER_DRIVER === 'swarm' ? swarmSample(engine, nc, config.NATS_REQUEST_TIMEOUT_MS) : undefined,
    );
    const volumeDir = config.VOLUME_DIR || join(process.env.AGENTHOST_STATE || '/var/lib/agenthost', 'volumes');
    // One directory per scope: the reconciler removes the files without a row, and only its own.
    const volumes = new QuotaVolumes({ engine, log, scope, dir: join(volumeDir, scope), enabled: config.VOLUME_QUOTA === 'enforce' });
    const storage = new StorageSampler({ db, engine, scope, log, intervalSeconds: config.STORAGE_SAMPLE_INTERVAL_SECONDS, capped: (id) => volumes.has(id) });
    const statusRelay = new StatusRelay({
      db,
      databaseUrl: config.DATABASE_URL,
      schema: SCHEMA,
      log,
      publish: (e) => publishEvent(nc, P.instanceStatusChanged, statusMessage(e), `instance-status-${e.instance_id}-${e.seq}`),
    });
    const pause = faults(config.FAULT_PAUSE_AT, log);
    const issueCredentials = (user_id: string, instance_id: string) =>
      request(nc, contracts.keyvault.issueCredentials, { user_id, instance_id }, { timeoutMs: config.NATS_REQUEST_TIMEOUT_MS });
    const handoff = new CredentialHandoff({ engine, log, issue: issueCredentials, startedByAReplica: startedByAReplica({ db, locks, engine }) });
    const containerEvents = new ContainerEvents({ engine, log, scope });
    const swarm = config.PROVISIONER_DRIVER === 'swarm';
    // Filled at start from the engine's API version: no-new-privileges on swarm services needs API 1.44.
    const extraSecurity = { noNewPrivileges: false };
    let runtime: InstanceRuntime;
    const readiness = new Readiness({
      db,
      engine,
      runtime: () => runtime,
      log,
      readyTimeoutSeconds: config.READY_TIMEOUT_SECONDS,
      defaultEstimateSeconds: config.ESTIMATED_READY_SECONDS,
      startsAtOnce: config.STARTS_AT_ONCE,
      startQueueMaxSeconds: config.START_QUEUE_MAX_SECONDS,
      stopContainer: (id, generation) =>
        locks
          .tryWith(id, async () => {
            const row = await db.selectFrom('instances').selectAll().where('id', '=', id).executeTakeFirst();
            // Only the failed container of this generation; a restart since then owns the instance.
            if (row && row.generation === generation && row.status === 'failed') {
              await instances.lifecycle.stopContainer(id).catch(() => {});
            }
          })
          .then(() => {}),
      // An upgrade whose agent is not ready is rolled back rather than failed.
      upgradeFailed: (id, generation, reason) => instances.upgrades.notReady(id, generation, reason),
    });
    // Placement runs one at a time across every provisioner replica (a database lock).
    const placementLock = <T>(fn: () => Promise<T>): Promise<T> => locks.with(`swarm-placement:${scope}`, fn, config.DOCKER_TIMEOUT_MS);
    const gatewayUrl = (host: string) => config.INSTANCE_GATEWAY_URL.replace(/\/+$/, '').replaceAll('{host}', host);
    runtime = swarm
      ? new SwarmInstances({
          engine,
          config,
          scope,
          log,
          keysUrl: (host) => `${gatewayUrl(host)}/keys/retrieve`,
          extraSecurity,
          serialize: placementLock,
        })
      : new InstanceContainers({ engine, config, scope, keysUrl: () => network.keysUrl(), handoff, volumes, tiers: config.TIER_LIMITS_JSON });
    const instances = buildInstances({
      db,
      engine,
      locks,
      config,
      tiers: config.TIER_LIMITS_JSON,
      log,
      readiness,
      stats,
      runtime,
      pause,
      // On a swarm the URL depends on the node, chosen at create; the gateway URL must be configured.
      keysUrl: () => (swarm ? gatewayUrl('') : network.keysUrl()),
      issueCredentials,
      // The live view saw a dead workload: the reconciler records it (a read never writes).
      recheck: (id) => void reconciler.recheck(id),
      sleepResidentMb: sleepResidentMb(config, swarm, log),
      purgeKeys: async (user_id, instance_id) =>
        void (await request(nc, contracts.keyvault.purgeInstance, { user_id, instance_id }, { timeoutMs: config.NATS_REQUEST_TIMEOUT_MS })),
      events: {
        created: (p) => publishEvent(nc, P.instanceCreated, p, `instance-created-${p.instance_id}`),
        deleted: (p) => publishEvent(nc, P.instanceDeleted, p, `instance-deleted-${p.instance_id}`),
      },
    });
    const backupDir = config.BACKUP_DIR || join(process.env.AGENTHOST_STATE || '/var/lib/agenthost', 'backups');
    const backups = new Backups({
      db,
      runtime,
      locks,
      instances,
      tiers: config.TIER_LIMITS_JSON,
      log,
      masterKey: config.BACKUP_KEY ? Buffer.from(config.BACKUP_KEY, 'base64') : undefined,
      store: archiveStore({ dir: backupDir, scope, s3: backupBucket(config) }),
      published: (e) => publishEvent(nc, P.instanceBackup, e, `instance-backup-${e.backup_id}`),
    });
    const backupScheduler = new BackupScheduler({
      db,
      backups,
      locks,
      tiers: config.TIER_LIMITS_JSON,
      log,
      scope,
      intervalSeconds: config.BACKUP_SCHEDULE_SECONDS,
    });
    const healing = swarm ? undefined : new SelfHealing({ db, runtime, locks, readiness, log, policy: config, issueCredentials });
    const reconciler = new Reconciler({
      db,
      engine,
      runtime,
      locks,
      instances,
      readiness,
      // The instance bridge and its host firewall are the docker driver's; swarm instances have their own networks.
      ...(swarm ? {} : { network, healing }),
      volumes,
      scope,
      log,
      intervalSeconds: config.RECONCILE_INTERVAL_SECONDS,
      readyTimeoutSeconds: config.READY_TIMEOUT_SECONDS,
    });
    const quota = new QuotaGuard({
      db,
      volumes,
      dockerUp: () => engine.available,
      locks,
      lifecycle: instances.lifecycle,
      tiers: config.TIER_LIMITS_JSON,
      log,
      intervalSeconds: config.QUOTA_CHECK_INTERVAL_SECONDS,
      graceSeconds: config.QUOTA_GRACE_SECONDS,
    });
    const idleSleep = new IdleSleep({
      db,
      locks,
      sleeper: instances.sleeper,
      dockerUp: () => engine.available,
      idleSeconds: config.SLEEP_AFTER_IDLE_SECONDS_JSON,
      deepIdleSeconds: config.DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON,
      intervalSeconds: config.SLEEP_CHECK_INTERVAL_SECONDS,
      log,
    });
    engine.onRecovery(() => void reconciler.trigger());
    instancesByState(db);
    if (swarm) swarmCapacity(() => nodeRoom(engine));
    const devices = new DevicePairing({ repo: instances.repo, engine, runtime, log });
    let subscriptionChanges: Subscription | undefined;
    let stopNodeWatch: (() => void) | undefined;
    let drainTimer: NodeJS.Timeout | undefined;

    return {
      checks: { docker: () => engine.available },
      endpoints: [
        endpoint(P.create, (input) => instances.creator.create(input)),
        endpoint(P.get, (input) => instances.view.get(input)),
        endpoint(P.list, (input) => instances.view.list(input)),
        endpoint(P.restart, (input) => instances.lifecycle.restart(input)),
        endpoint(P.start, (input) => instances.lifecycle.start(input)),
        endpoint(P.stop, (input) => instances.lifecycle.stop(input)),
        endpoint(P.remove, (input) => instances.lifecycle.remove(input)),
        endpoint(P.upgrade, (input) => instances.upgrades.upgrade(input)),
        endpoint(P.logs, (input) => instances.view.logs(input)),
        endpoint(P.logsPage, (input) => instances.view.logsPage(input)),
        endpoint(P.usage, (input) => instances.view.usage(input)),
        endpoint(P.backup, (input) => backups.create(input)),
        endpoint(P.backups, (input) => backups.list(input)),
        endpoint(P.restore, (input) => backups.restore(input)),
        endpoint(P.clone, (input) => backups.clone(input)),
        endpoint(P.removeBackup, (input) => backups.remove(input)),
        endpoint(P.routes, (input) => listRoutes({ db, runtime }, input)),
        endpoint(P.activity, async (input) => ({ recorded: await idleSleep.record(input.instance_ids) })),
        endpoint(P.wake, (input) => instances.sleeper.wake(input.instance_id)),
        endpoint(D.list, (input) => devices.list(input)),
        endpoint(D.decide, (input) => devices.decide(input)),
      ],
      async start() {
        await ensureEventStream(nc, { replicas: config.NATS_STREAM_REPLICAS });
        statusRelay.start();
        if (!swarm) await volumes.check(); // enforce without loop devices: refuse to start (off: a warning)
        engine.startMonitor();
        if (await engine.ping()) {
          if (swarm) {
            const version = await engine.docker.version();
            extraSecurity.noNewPrivileges = apiAtLeast(version.ApiVersion, 1, 44);
            log.info({ api: version.ApiVersion, no_new_privileges: extraSecurity.noNewPrivileges }, 'swarm driver: instance hardening by engine API version');
          } else {
            // The network and firewall must be in place before any instance runs: a failure here is fatal.
            await network.ensure();
          }
          const report = await reconciler.trigger();
          log.info({ ...report }, 'initial reconcile done');
        } else {
          engine.noteDown();
          log.error({ docker_host: config.DOCKER_HOST || 'default' }, 'docker engine unreachable at start; requests get 503 until it answers');
        }
        reconciler.start();
        idleSleep.start();
        // A node that goes away fails its instances (node_down) within seconds, and brings them back when it returns.
        // A draining node's instances move, with their volume, to the node with the most room.
        if (runtime instanceof SwarmInstances) {
          const drainer = new Drainer({ db, engine, runtime, locks, instances, config, scope, log, serialize: placementLock });
          stopNodeWatch = runtime.watchNodes(() => {
            void reconciler.trigger();
            void drainer.trigger();
          });
          void drainer.trigger();
          // Also on the reconcile schedule: a node change seen by no replica, and jobs a dead replica left.
          drainTimer = setInterval(() => void drainer.trigger(), config.RECONCILE_INTERVAL_SECONDS * 1000);
          drainTimer.unref();
        }
        stats.start();
        // Credentials by stdin, volume sizes and the volume quota need the instance's own engine: the docker
        // driver's. (Swarm: credentials are swarm secrets; the rest is not measured yet, see docs/deploy/swarm.md.)
        if (!swarm) {
          handoff.listen(containerEvents);
          healing?.listen(containerEvents);
          containerEvents.on('die', (e) => observeContainerEvent('die', e.id, e.attrs.exitCode));
          containerEvents.on('oom', (e) => observeContainerEvent('oom', e.id));
          containerEvents.watch();
          storage.start();
          if (config.VOLUME_QUOTA === 'enforce') quota.start();
          if (config.BACKUP_KEY) backupScheduler.start();
        }
        subscriptionChanges = await stopEndedSubscriptions({ nc, db, config, log, suspendWallet: (w) => instances.lifecycle.suspendWallet(w) });
      },
      async stop() {
        await subscriptionChanges?.stop();
        reconciler.stop();
        idleSleep.stop();
        stopNodeWatch?.();
        clearInterval(drainTimer);
        containerEvents.stop();
        healing?.stop();
        readiness.stop();
        await statusRelay.stop();
        stats.stop();
        storage.stop();
        quota.stop();
        backupScheduler.stop();
        engine.stopMonitor();
        await locks.close().catch((err) => log.warn({ err: describe(err) }, 'closing lock pool'));
      },
    };
  },
});
