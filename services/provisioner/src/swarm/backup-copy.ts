import { AppError, pinnedNode } from '@agenthost/shared';
import type { InstanceRow } from '../db/schema.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { o } from '../docker/call.ts';
import { LABEL_USER } from '../docker/spec.ts';
import { exportFromNode, importToNode } from './backup-transfer.ts';
import { nodeByAddr } from './placement.ts';
import type { Spec } from './spec.ts';

/** On an instance service whose agent is stopped for a backup's copy: it is shown starting, not failed, meanwhile. */
export const LABEL_COPYING = 'agenthost.copying';

/** A backup's or restore's copy can take as long as a large volume takes to stream. */
const COPY_TIMEOUT_MS = 30 * 60_000;

/** What the swarm runtime lends the backup copy of an instance. */
export interface CopyOps {
  engine(): DockerEngine;
  scope(): string;
  spec(id: string): Promise<Spec | undefined>;
  /** Read, change and write the instance's service (false: it is missing). */
  update(id: string, change: (s: Spec) => boolean | void): Promise<boolean>;
  /** Until its task has stopped (bounded by the stop timeout). */
  waitStopped(id: string): Promise<void>;
}

/**
 * A backup of an instance on the swarm: its volume streamed from its node (backup-transfer.ts). The agent is
 * stopped for the copy, since the Engine API cannot pause a container on another node, and started again as it
 * was (same task spec and credentials), so its files are copied as of one moment, as the docker driver's
 * paused copy is. Meanwhile it is shown starting (LABEL_COPYING), not failed.
 */
export async function exportInstance(ops: CopyOps, id: string, sink: (tar: NodeJS.ReadableStream) => Promise<void>): Promise<void> {
  const spec = await ops.spec(id);
  const node = pinnedNode(spec?.TaskTemplate.Placement?.Constraints);
  if (!spec || !node) throw new AppError('INSTANCE_STATE_CONFLICT', 'The instance has no workload to back up; start or restart it first');
  const running = (spec.Mode?.Replicated?.Replicas ?? 0) > 0;
  const copying = (on: boolean) =>
    ops.update(id, (s) => {
      s.Labels = { ...s.Labels };
      if (on) s.Labels[LABEL_COPYING] = 'true';
      else delete s.Labels[LABEL_COPYING];
      s.Mode = { Replicated: { Replicas: on ? 0 : 1 } };
    });
  if (running) {
    await copying(true);
    await ops.waitStopped(id);
  }
  try {
    const t = {
      instanceId: id,
      userId: spec.Labels?.[LABEL_USER] ?? '',
      scope: ops.scope(),
      image: spec.TaskTemplate.ContainerSpec!.Image!,
      node,
      timeoutMs: COPY_TIMEOUT_MS,
    };
    await exportFromNode(ops.engine(), t, sink);
  } finally {
    if (running) await copying(false);
  }
}

/** A restore's files into the instance's new volume on its node (row.node_host), before its service is made again. */
export async function importInstance(ops: CopyOps, row: InstanceRow, tar: NodeJS.ReadableStream): Promise<void> {
  const engine = ops.engine();
  const node = row.node_host ? await nodeByAddr(engine, row.node_host) : undefined;
  if (!node) throw new Error(`the node of ${row.id} (${row.node_host}) is not in the swarm`);
  const image = (await engine.run('image inspect', (abortSignal) => engine.docker.getImage(row.image).inspect(o({ abortSignal })))).Id;
  await importToNode(engine, { instanceId: row.id, userId: row.user_id, scope: ops.scope(), image, node, timeoutMs: COPY_TIMEOUT_MS }, tar);
}
