import type { DockerEngine } from '../docker/engine.ts';
import { containerName } from '../docker/spec.ts';
import type { InstanceReads } from './instance-reads.ts';
import type { OpLocks } from './locks.ts';

/** A container start this close to the start its row records was that start (the row is written around it). */
const OWN_START_WINDOW_MS = 30_000;

/**
 * Whether some provisioner replica made an instance container's start (docker/handoff.ts asks, for every start on
 * the engine's event stream): a replica starting it holds the instance's lock, and once the lock is free the row
 * records when it was started. Only a start nobody made (an operator's `docker start`) is foreign.
 */
export function startedByAReplica(deps: { repo: Pick<InstanceReads, 'startedAt'>; locks: OpLocks; engine: DockerEngine }): (id: string) => Promise<boolean> {
  return async (id) => {
    const judged = await deps.locks.tryWith(id, async () => {
      const startedAt = await deps.repo.startedAt(id);
      if (!startedAt) return false;
      const info = await deps.engine.run('container inspect', (abortSignal) => deps.engine.docker.getContainer(containerName(id)).inspect({ abortSignal }));
      return Math.abs(Date.parse(info.State.StartedAt) - new Date(startedAt).getTime()) < OWN_START_WINDOW_MS;
    });
    // The lock is held: an operation of some replica is starting it right now.
    return judged ?? true;
  };
}
