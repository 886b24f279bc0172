import type { Logger } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow } from '../db/schema.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { describe, o } from '../docker/call.ts';
import type { InstanceRepo } from '../domain/instance-repo.ts';
import type { InstanceLifecycle } from '../domain/lifecycle.ts';
import type { OpLocks } from '../domain/locks.ts';
import { NODE_DOWN } from '../domain/runtime.ts';
import { singleFlight } from '../domain/single-flight.ts';
import { removeVolumeOnNode, startVolumeRemoval, sweepJobs } from './janitor.ts';
import { copyVolume } from './mover.ts';
import { isDraining, nodeAddr, pickNode } from './placement.ts';
import type { SwarmInstances } from './runtime.ts';
import { volumeName } from './spec.ts';

const MOVE_FAILED = 'Moving it off its draining node failed; it is tried again';
/** Failures a move cures: the instance could not run only because of where it was. */
const placementFailure = (r: InstanceRow) =>
  r.status === 'failed' &&
  (r.failure_reason === NODE_DOWN || r.failure_reason === MOVE_FAILED || (r.failure_reason ?? '').startsWith('No node can run it now'));

/**
 * Moves the instances of a node being drained (labelled agenthost.drain=true by `cli.ts drain`, which sets the
 * swarm's own drain once they are gone) to the node with the most room, one at a time, with their volume: same id, keys and access token; the URL names the new node. An
 * instance that was running (or failed only for want of a node) runs again there; a stopped one stays stopped.
 * Each move holds the instance's lock, so a second provisioner replica skips it; a failed copy leaves the old
 * volume untouched and is tried again at the next pass.
 */
export class Drainer {
  private readonly deps: {
    engine: DockerEngine;
    runtime: SwarmInstances;
    locks: OpLocks;
    repo: InstanceRepo;
    lifecycle: Pick<InstanceLifecycle, 'recreateLocked'>;
    config: ProvisionerConfig;
    scope: string;
    log: Logger;
    serialize<T>(fn: () => Promise<T>): Promise<T>;
  };

  constructor(deps: Drainer['deps']) {
    this.deps = deps;
  }

  /** Run a pass now (or right after the current one); resolves with the number of instances moved. */
  readonly trigger = singleFlight(
    () => this.pass(),
    (err) => {
      this.deps.log.warn({ err: describe(err) }, 'drain pass failed; will retry');
      return 0;
    },
  );

  private async pass(): Promise<number> {
    const { repo, engine, locks, config, scope, log } = this.deps;
    const swept = await sweepJobs(engine, scope, (config.SWARM_MOVE_TIMEOUT_SECONDS + 120) * 1000);
    if (swept) log.warn({ swept }, 'removed copy or removal jobs left by a provisioner that died mid-job');
    const nodes = await engine.run('node list', (abortSignal) => engine.docker.listNodes(o({ abortSignal })));
    let moved = 0;
    for (const node of nodes.filter((n) => isDraining(n) && n.Status?.State === 'ready' && n.Spec?.Availability !== 'drain')) {
      const rows = await repo.settledOnNode(nodeAddr(node));
      for (const row of rows) {
        // One instance that cannot move now does not hold up the others.
        const done = await locks
          .tryWith(row.id, async () => {
            const fresh = await repo.byId(row.id);
            if (!fresh || fresh.node_host !== row.node_host || fresh.deleting_at || fresh.step !== 'done') return false;
            return this.move(fresh, node.ID!);
          })
          .catch((err) => {
            this.deps.log.warn({ instance_id: row.id, err: describe(err) }, 'could not move an instance off a draining node; will retry');
            return false;
          });
        if (done) moved++;
      }
    }
    return moved;
  }

  private async move(row: InstanceRow, from: string): Promise<boolean> {
    const { repo, engine, runtime, config, log } = this.deps;
    // pickNode never picks a draining node, so the target is never the node it leaves.
    const target = await this.deps.serialize(() => pickNode(engine, row.memory_mb, row.cpus * config.SWARM_CPU_RESERVATION));
    const restart = row.status === 'running' || row.status === 'provisioning' || placementFailure(row);
    log.info({ instance_id: row.id, from, to: target.id, restart }, 'moving an instance off a draining node');
    if (restart) {
      // Provisioning (step recreating) while it moves: readiness watchers of the old generation stand down, and
      // the reconciler leaves it (it repairs a recreating row only when its lock is free: after a crash).
      await repo.markMoving(row.id);
    }
    // Read before the stop, as the service that holds it is changed from here on.
    const token = await runtime.token(row.id);
    let copied: boolean;
    try {
      copied = await this.copy(row, from, target.id);
    } catch (err) {
      // An engine fault mid-move is a failed copy too: the instance is marked so that the next pass (which
      // cures MOVE_FAILED) starts it on its new node instead of leaving it stopped and provisioning.
      if (restart) await this.deps.repo.markFailed(row.id, row.generation + 1, MOVE_FAILED).catch(() => {});
      throw err;
    }
    if (!copied) {
      log.error({ instance_id: row.id, from, to: target.id }, 'the volume copy failed; the instance stays on its draining node and is tried again');
      if (restart) await this.deps.repo.markFailed(row.id, row.generation + 1, MOVE_FAILED);
      return false;
    }
    return this.land(row, from, target, restart, token);
  }

  /** Stops the instance and copies its volume to the target node; false when the copy itself failed. */
  private async copy(row: InstanceRow, from: string, to: string): Promise<boolean> {
    const { engine, runtime, config, scope } = this.deps;
    await runtime.stop(row.id);
    const image = (await engine.run('image inspect', (abortSignal) => engine.docker.getImage(row.image).inspect(o({ abortSignal })))).Id;
    return copyVolume(engine, { instanceId: row.id, userId: row.user_id, scope, image, from, to, timeoutMs: config.SWARM_MOVE_TIMEOUT_SECONDS * 1000 });
  }

  /** The copy is on the new node: the row follows, the instance starts there (or stays stopped), the old volume goes. */
  private async land(row: InstanceRow, from: string, target: { id: string; addr: string }, restart: boolean, token: string | undefined): Promise<boolean> {
    const { repo, engine, runtime, lifecycle, config, scope, log } = this.deps;
    const moved = await repo.markMoved(row.id, target.addr);
    // Started once the row has moved (a database fault before that leaves the instance where it was, with its data)
    // and before the instance leaves the node (see startVolumeRemoval); its script waits for the volume to be free.
    // An engine fault here must not stop the move: the removal is then started after it, as a last try.
    const removal = { node: from, volume: volumeName(row.id), image: config.SWARM_JANITOR_IMAGE, scope, timeoutMs: 90_000 };
    const early = config.SWARM_JANITOR_IMAGE
      ? await startVolumeRemoval(engine, removal).catch((err) => {
          log.warn({ instance_id: row.id, node: from, err: describe(err) }, 'could not start the old volume removal before the move; trying after it');
          return undefined;
        })
      : undefined;
    if (restart) {
      await lifecycle.recreateLocked(moved);
    } else {
      await runtime.remove(row.id);
      if (token) await runtime.create(moved, token);
    }
    if (config.SWARM_JANITOR_IMAGE) {
      const removed = early ? await early() : await removeVolumeOnNode(engine, removal);
      if (!removed) log.warn({ instance_id: row.id, node: from }, 'the old volume of a moved instance could not be removed');
    }
    log.info({ instance_id: row.id, node_host: target.addr }, 'instance moved');
    return true;
  }
}
