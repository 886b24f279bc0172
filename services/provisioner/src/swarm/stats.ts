import type { NatsConnection } from 'nats';
import { contracts, encode, safeDecode } from '@agenthost/shared';
import type { DockerEngine } from '../docker/engine.ts';
import { o } from '../docker/call.ts';
import type { Sample } from '../domain/stats.ts';
import { serviceName } from './spec.ts';

const E = contracts.edge;

/**
 * A swarm instance's CPU and memory reading: its running task names its node and container; that node's edge reads
 * the container's cgroups (a manager's Engine API has no stats of another node's containers).
 */
export function swarmSample(engine: DockerEngine, nc: NatsConnection, timeoutMs: number) {
  return async (instanceId: string): Promise<Sample | undefined> => {
    const tasks = await engine.run('task list', (abortSignal) =>
      engine.docker.listTasks(o({ filters: { service: [serviceName(instanceId)], 'desired-state': ['running'] }, abortSignal })),
    );
    const task = tasks.find((t) => t.Status?.State === 'running' && t.NodeID && t.Status?.ContainerStatus?.ContainerID);
    const container = task?.Status?.ContainerStatus?.ContainerID;
    if (!task?.NodeID || !container) return undefined;
    const reply = await nc.request(E.nodeStatsSubject(task.NodeID), encode({ containers: [container] }), { timeout: timeoutMs });
    const parsed = E.nodeStatsReply.safeParse(safeDecode(reply.data));
    const usage = parsed.success ? parsed.data.containers[container] : undefined;
    if (!parsed.success || !usage) return undefined;
    // CPU time against wall time on one CPU's scale: the share of a CPU, as docker stats shows it.
    return { at: parsed.data.at_ms, cpuTotal: usage.cpu_ns, systemTotal: parsed.data.at_ms * 1e6, onlineCpus: 1, memoryBytes: usage.memory_bytes };
  };
}
