import type { Kysely } from 'kysely';
import type { Logger, TierTable } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { ProvisionerDB } from '../db/schema.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { InstanceCreator } from './create.ts';
import { LocalImages } from './images.ts';
import { InstanceRepo } from './instance-repo.ts';
import { LiveView } from './instance-view.ts';
import { InstanceLifecycle, type InstanceEvents } from './lifecycle.ts';
import type { OpLocks } from './locks.ts';
import type { Readiness } from './readiness.ts';
import type { Credentials, InstanceRuntime } from './runtime.ts';
import type { StatsSampler } from './stats.ts';

export interface InstancesDeps {
  db: Kysely<ProvisionerDB>;
  engine: DockerEngine;
  locks: OpLocks;
  config: ProvisionerConfig;
  tiers: TierTable;
  log: Logger;
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
  /** The reconciler's look at one instance, asked for by the live view when it sees a dead workload. */
  recheck(instanceId: string): void;
  pause(point: string): Promise<void>;
}

/**
 * The instance code, by job: the row repository (every query and transition of the instances table), the
 * read-only live view (status, list, logs, usage), the lifecycle (restart, start, stop, delete, under the
 * operation locks) and the create saga. The runtime that runs the workloads is domain/runtime.ts.
 */
export interface Instances {
  repo: InstanceRepo;
  view: LiveView;
  lifecycle: InstanceLifecycle;
  creator: InstanceCreator;
}

export function buildInstances(deps: InstancesDeps): Instances {
  const repo = new InstanceRepo(deps.db, deps.config.READY_TIMEOUT_SECONDS);
  const images = new LocalImages(deps.engine);
  const view = new LiveView({ repo, engine: deps.engine, runtime: deps.runtime, stats: deps.stats, urlTemplate: deps.config.INSTANCE_URL_TEMPLATE, recheck: deps.recheck });
  const lifecycle = new InstanceLifecycle({ ...deps, repo, images });
  const creator = new InstanceCreator({ ...deps, repo, images, view, lifecycle });
  return { repo, view, lifecycle, creator };
}
