import { AppError } from '@agenthost/shared';
import { o, type DockerEngine } from '../docker/engine.ts';

export interface NodeChoice {
  id: string;
  /** The node's address (its instances' URLs and probes use it). */
  addr: string;
}

/**
 * The ready, active node with the most unreserved memory (reservations of every task meant to run there,
 * ours and the platform's); ties go to the node with fewer tasks. 503 when none has room for `memoryMb`.
 */
export async function pickNode(engine: DockerEngine, memoryMb: number): Promise<NodeChoice> {
  const [nodes, tasks] = await Promise.all([
    engine.run('node list', (abortSignal) => engine.docker.listNodes(o({ abortSignal }))),
    engine.run('task list', (abortSignal) => engine.docker.listTasks(o({ filters: { 'desired-state': ['running'] }, abortSignal }))),
  ]);
  const reserved = new Map<string, { bytes: number; tasks: number }>();
  for (const t of tasks) {
    if (!t.NodeID) continue;
    const r = reserved.get(t.NodeID) ?? { bytes: 0, tasks: 0 };
    r.bytes += t.Spec?.Resources?.Reservations?.MemoryBytes ?? 0;
    r.tasks++;
    reserved.set(t.NodeID, r);
  }
  const need = memoryMb * 1024 * 1024;
  const candidates = nodes
    .filter((n) => n.Status?.State === 'ready' && n.Spec?.Availability === 'active')
    .map((n) => {
      const r = reserved.get(n.ID!) ?? { bytes: 0, tasks: 0 };
      return { id: n.ID!, addr: n.Status!.Addr!, free: (n.Description?.Resources?.MemoryBytes ?? 0) - r.bytes, tasks: r.tasks };
    })
    .filter((n) => n.free >= need)
    .sort((a, b) => b.free - a.free || a.tasks - b.tasks);
  const best = candidates[0];
  if (!best) throw new AppError('DOCKER_UNAVAILABLE', `No node has ${memoryMb} MB of memory unreserved; add a node or free one`);
  return { id: best.id, addr: best.addr };
}

/** The node an address belongs to (an instance's node, from its row). */
export async function nodeByAddr(engine: DockerEngine, addr: string): Promise<string | undefined> {
  const nodes = await engine.run('node list', (abortSignal) => engine.docker.listNodes(o({ abortSignal })));
  return nodes.find((n) => n.Status?.Addr === addr)?.ID;
}
