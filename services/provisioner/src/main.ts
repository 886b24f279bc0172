import { join } from 'node:path';
import { keepEventStream, runService, type Subscription } from '@agenthost/shared';
import { provisionerConfig } from './config.ts';
import { buildContext, SCHEMA, stateDir, type ProvisionerContext } from './context.ts';
import { Checkpoints } from './docker/checkpoint.ts';
import { migrations } from './db/migrations/index.ts';
import type { ProvisionerDB } from './db/schema.ts';
import { describe } from './docker/call.ts';
import { apiAtLeast } from './docker/engine.ts';
import { stopEndedSubscriptions } from './domain/subscription-ends.ts';
import { endpoints } from './endpoints.ts';
import { instancesByState, observeContainerEvent, swarmCapacity } from './metrics.ts';
import { nodeRoom } from './swarm/placement.ts';
import { SwarmInstances } from './swarm/runtime.ts';

/**
 * The provisioner's background work: started once its endpoints are served, stopped on SIGTERM. Declared above
 * runService: build runs inside that top-level await, before any declaration below it is evaluated.
 */
class Running {
  private readonly ctx: ProvisionerContext;
  private subscriptionChanges: Subscription | undefined;
  private stopNodeWatch: (() => void) | undefined;
  private drainTimer: NodeJS.Timeout | undefined;

  constructor(ctx: ProvisionerContext) {
    this.ctx = ctx;
  }

  async start(): Promise<void> {
    const { config, nc, log, engine, runtime, reconciler, drainer } = this.ctx;
    const swarm = config.PROVISIONER_DRIVER === 'swarm';
    await keepEventStream(nc, { replicas: config.NATS_STREAM_REPLICAS }, log);
    this.ctx.statusRelay.start();
    engine.startMonitor();
    if (await engine.ping()) {
      if (swarm) {
        const version = await engine.docker.version();
        const { extraSecurity } = this.ctx;
        extraSecurity.noNewPrivileges = apiAtLeast(version.ApiVersion, 1, 44);
        log.info({ api: version.ApiVersion, no_new_privileges: extraSecurity.noNewPrivileges }, 'swarm driver: instance hardening by engine API version');
      } else {
        // The network and firewall must be in place before any instance runs: a failure here is fatal.
        await this.ctx.network.ensure();
      }
      const report = await reconciler.trigger();
      log.info({ ...report }, 'initial reconcile done');
    } else {
      engine.noteDown();
      log.error({ docker_host: config.DOCKER_HOST || 'default' }, 'docker engine unreachable at start; requests get 503 until it answers');
    }
    reconciler.start();
    this.ctx.idleSleep.start();
    this.ctx.pool?.start();
    // A node that goes away fails its instances (node_down) within seconds, and brings them back when it returns.
    // A draining node's instances move, with their volume, to the node with the most room.
    if (runtime instanceof SwarmInstances && drainer) {
      this.stopNodeWatch = runtime.watchNodes(() => {
        reconciler.nodesChanged();
        void drainer.trigger();
      });
      void drainer.trigger();
      // Also on the reconcile schedule: a node change seen by no replica, and jobs a dead replica left.
      this.drainTimer = setInterval(() => void drainer.trigger(), config.RECONCILE_INTERVAL_SECONDS * 1000);
      this.drainTimer.unref();
    }
    this.ctx.stats.start();
    // Credentials by stdin, volume sizes and the volume quota need the instance's own engine: the docker
    // driver's. (Swarm: credentials are swarm secrets; the rest is not measured yet, see docs/deploy/swarm.md.)
    if (!swarm) this.startDockerDriverWork();
    this.subscriptionChanges = await stopEndedSubscriptions({
      nc,
      repo: this.ctx.repo,
      config,
      log,
      suspendWallet: (w) => this.ctx.lifecycle.suspendWallet(w),
    });
  }

  private startDockerDriverWork(): void {
    const { config, containerEvents, handoff, healing } = this.ctx;
    handoff.listen(containerEvents);
    healing?.listen(containerEvents);
    containerEvents.on('die', (e) => observeContainerEvent('die', e.id, e.attrs.exitCode));
    containerEvents.on('oom', (e) => observeContainerEvent('oom', e.id));
    containerEvents.watch();
    this.ctx.storage.start();
    if (config.VOLUME_QUOTA === 'enforce') this.ctx.quota.start();
    if (config.BACKUP_KEY) this.ctx.backupScheduler.start();
  }

  async stop(): Promise<void> {
    const { ctx } = this;
    await this.subscriptionChanges?.stop();
    ctx.reconciler.stop();
    ctx.idleSleep.stop();
    ctx.pool?.stop();
    this.stopNodeWatch?.();
    clearInterval(this.drainTimer);
    ctx.containerEvents.stop();
    ctx.healing?.stop();
    ctx.readiness.stop();
    await ctx.statusRelay.stop();
    ctx.stats.stop();
    ctx.storage.stop();
    ctx.quota.stop();
    ctx.backupScheduler.stop();
    ctx.engine.stopMonitor();
    await ctx.locks.close().catch((err) => ctx.log.warn({ err: describe(err) }, 'closing lock pool'));
  }
}

await runService<typeof provisionerConfig, ProvisionerDB>({
  name: 'provisioner',
  version: '1.0.0',
  config: provisionerConfig,
  db: { schema: SCHEMA, migrations },
  async build(deps) {
    const { config, log } = deps;
    const checkpoints =
      config.PROVISIONER_DRIVER === 'swarm'
        ? undefined
        : await Checkpoints.detect(
            {
              mode: config.SLEEP_CHECKPOINT,
              masterKey: config.CHECKPOINT_KEY ? Buffer.from(config.CHECKPOINT_KEY, 'base64') : undefined,
              dockerHost: config.DOCKER_HOST,
              runtimeDir: config.CRIU_RUNTIME_DIR,
              // One directory per scope, as volumes: the reconciler removes the images without a row, and only its own.
              dir: join(config.CHECKPOINT_DIR || stateDir('checkpoints'), config.INSTANCE_SCOPE || config.INSTANCE_NETWORK),
            },
            log,
          );
    const ctx = buildContext({ ...deps, ...(checkpoints ? { checkpoints } : {}) });
    // VOLUME_QUOTA=enforce without loop devices refuses to start (off: a warning). Checked before any endpoint serves:
    // a replica that is about to exit would take requests from its queue group and lose them (their callers wait
    // out their timeout), once per restart of a crash loop.
    if (config.PROVISIONER_DRIVER !== 'swarm') await ctx.volumes.check();
    instancesByState(ctx.repo);
    if (ctx.config.PROVISIONER_DRIVER === 'swarm') swarmCapacity(() => nodeRoom(ctx.engine));
    const running = new Running(ctx);
    return {
      checks: { docker: () => ctx.engine.available },
      endpoints: endpoints(ctx),
      start: () => running.start(),
      stop: () => running.stop(),
    };
  },
});
