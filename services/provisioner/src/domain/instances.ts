import type { Kysely } from 'kysely';
import type { ProvisionerDB } from '../db/schema.ts';
import { InstanceCreator, type CreateDeps } from './create.ts';
import { LocalImages } from './images.ts';
import { InstanceRepo } from './instance-repo.ts';
import { LiveView } from './instance-view.ts';
import { InstanceLifecycle, type LifecycleDeps } from './lifecycle.ts';
import { Sleeper } from './sleep.ts';
import { InstanceUpgrades } from './upgrades.ts';

/** What the instance code needs from the composition root (main.ts). */
export type InstancesDeps = Omit<LifecycleDeps, 'repo' | 'images'> &
  Pick<CreateDeps, 'config' | 'keysUrl'> & {
    db: Kysely<ProvisionerDB>;
    /** The reconciler's look at one instance, asked for by the live view when it sees a dead workload. */
    recheck(instanceId: string): void;
    /** A light sleep keeps this much memory resident and pushes the rest out to swap; undefined: it only freezes. */
    sleepResidentMb: number | undefined;
  };

/**
 * The instance code, by job: the row repository (every query and transition of the instances table), the
 * read-only live view (status, list, logs, usage), the lifecycle (restart, start, stop, delete, under the
 * operation locks), idle sleep and wake, the create saga and upgrades (with their rollback). The runtime that runs the workloads is domain/runtime.ts.
 */
export interface Instances {
  repo: InstanceRepo;
  view: LiveView;
  lifecycle: InstanceLifecycle;
  sleeper: Sleeper;
  creator: InstanceCreator;
  upgrades: InstanceUpgrades;
}

export function buildInstances(deps: InstancesDeps): Instances {
  const repo = new InstanceRepo(deps.db, deps.config.READY_TIMEOUT_SECONDS);
  const images = new LocalImages(deps.engine);
  const view = new LiveView({
    repo,
    engine: deps.engine,
    runtime: deps.runtime,
    stats: deps.stats,
    urlTemplate: deps.config.INSTANCE_URL_TEMPLATE,
    recheck: deps.recheck,
    images,
    frameworkImages: deps.config.FRAMEWORK_IMAGES,
  });
  const lifecycle = new InstanceLifecycle({ ...deps, repo, images });
  const creator = new InstanceCreator({ ...deps, repo, images, view, lifecycle });
  const upgrades = new InstanceUpgrades({ ...deps, repo, images, lifecycle });
  const sleeper = new Sleeper({ ...deps, repo, images, lifecycle, residentMb: deps.sleepResidentMb });
  return { repo, view, lifecycle, sleeper, creator, upgrades };
}
