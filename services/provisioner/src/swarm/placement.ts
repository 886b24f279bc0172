import { AppError } from '@agenthost/shared';
import type { DockerEngine } from '../docker/engine.ts';
import { o } from '../docker/call.ts';
import { LABEL_INSTANCE } from '../docker/spec.ts';
import { DRAIN_LABEL, nodeAddr as sharedNodeAddr, pinnedNode } from '@agenthost/shared';

export interface NodeChoice {
  id: string;
  /** The node's address (its instances' URLs and probes use it). */
  addr: string;
}

/** A node as placement sees it: what is left of its memory and CPU after every reservation meant to run there. */
export interface NodeRoom extends NodeChoice {
  hostname: string;
  /** Ready, active and not being drained: it takes new instances. */
  open: boolean;
  freeBytes: number;
  freeNanoCpus: number;
  tasks: number;
  instances: number;
}

/**
 * Every node's unreserved memory and CPU (reservations of every task meant to run there, ours and the platform's)
 * and its instances: placement's input, and the per-node capacity gauges (metrics.ts).
 */
export async function nodeRoom(engine: DockerEngine): Promise<NodeRoom[]> {
  const [nodes, tasks, instances] = await Promise.all([
    engine.run('node list', (abortSignal) => engine.docker.listNodes(o({ abortSignal }))),
    engine.run('task list', (abortSignal) => engine.docker.listTasks(o({ filters: { 'desired-state': ['running'] }, abortSignal }))),
    engine.run('service list', (abortSignal) => engine.docker.listServices(o({ filters: { label: [LABEL_INSTANCE] }, abortSignal }))),
  ]);
  const reserved = new Map<string, { bytes: number; nanoCpus: number; tasks: number; instances: number }>();
  const add = (node: string, res: { MemoryBytes?: number; NanoCPUs?: number } | undefined, instance = false) => {
    const r = reserved.get(node) ?? { bytes: 0, nanoCpus: 0, tasks: 0, instances: 0 };
    r.bytes += res?.MemoryBytes ?? 0;
    r.nanoCpus += res?.NanoCPUs ?? 0;
    r.tasks++;
    if (instance) r.instances++;
    reserved.set(node, r);
  };
  // Instances count by their spec (pinned, started), not by their tasks: the task of an instance created a
  // moment ago may not exist yet, and the next create must already see its reservation.
  const pinned = new Set<string>();
  for (const svc of instances) {
    pinned.add(svc.ID);
    const node = pinnedNode(svc.Spec?.TaskTemplate?.Placement?.Constraints);
    // One created a moment ago is still at replicas 0: its start follows at once.
    const starting = Date.now() - Date.parse(svc.CreatedAt ?? '') < 60_000;
    if (node && ((svc.Spec?.Mode?.Replicated?.Replicas ?? 0) > 0 || starting)) add(node, svc.Spec?.TaskTemplate?.Resources?.Reservations, true);
  }
  for (const t of tasks) if (t.NodeID && !pinned.has(t.ServiceID ?? '')) add(t.NodeID, t.Spec?.Resources?.Reservations);
  return nodes.map((n) => {
    const r = reserved.get(n.ID!) ?? { bytes: 0, nanoCpus: 0, tasks: 0, instances: 0 };
    return {
      id: n.ID!,
      addr: nodeAddr(n),
      hostname: n.Description?.Hostname ?? n.ID!,
      open: n.Status?.State === 'ready' && n.Spec?.Availability === 'active' && !isDraining(n),
      freeBytes: (n.Description?.Resources?.MemoryBytes ?? 0) - r.bytes,
      freeNanoCpus: (n.Description?.Resources?.NanoCPUs ?? 0) - r.nanoCpus,
      tasks: r.tasks,
      instances: r.instances,
    };
  });
}

/** The open node with the most unreserved memory; ties go to the node with fewer tasks. 503 when none has room for the reservation. */
export async function pickNode(engine: DockerEngine, memoryMb: number, cpus: number): Promise<NodeChoice> {
  const need = memoryMb * 1024 * 1024;
  const best = (await nodeRoom(engine))
    // The swarm would leave a task pending on a node without room: refuse instead, at once.
    .filter((n) => n.open && n.freeBytes >= need && n.freeNanoCpus >= Math.round(cpus * 1e9))
    .sort((a, b) => b.freeBytes - a.freeBytes || a.tasks - b.tasks)[0];
  if (!best) throw new AppError('DOCKER_UNAVAILABLE', `No node has ${memoryMb} MB of memory and ${cpus} CPU unreserved; add a node or free one`);
  return { id: best.id, addr: best.addr };
}

/** The node an address belongs to (an instance's node, from its row). */
export async function nodeByAddr(engine: DockerEngine, addr: string): Promise<string | undefined> {
  const nodes = await engine.run('node list', (abortSignal) => engine.docker.listNodes(o({ abortSignal })));
  return nodes.find((n) => nodeAddr(n) === addr)?.ID;
}

type SwarmNode = Awaited<ReturnType<DockerEngine['docker']['listNodes']>>[number];

/** A node being emptied of instances (DRAIN_LABEL): it takes no new instance and its instances move off it. */
export const isDraining = (n: SwarmNode): boolean => n.Spec?.Labels?.[DRAIN_LABEL] === 'true';

/** The address a node's instances are reached at: shared (packages/shared swarm.ts) with the deployment's tests. */
export function nodeAddr(n: SwarmNode): string {
  return sharedNodeAddr(n);
}
