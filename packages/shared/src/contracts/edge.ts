import { z } from 'zod';

// Live CPU and memory of swarm instances. A manager's Engine API has no stats of a container on another node, so the
// edge task every node runs (services/edge) reads them from that node's cgroups, for the provisioner only.

/** Swarm only: the edge of a node answers on this subject suffixed with its node id. */
export const NODE_STATS_PREFIX = 'edge.v1.stats';
export const nodeStatsSubject = (nodeId: string): string => `${NODE_STATS_PREFIX}.${nodeId}`;

export const nodeStatsRequest = z.object({
  containers: z
    .array(z.string().regex(/^[0-9a-f]{64}$/))
    .min(1)
    .max(1000),
});
/** Per container found on the node: CPU time used so far and memory as `docker stats` counts it (page cache left out). */
export const containerUsage = z.object({ cpu_ns: z.number().nonnegative(), memory_bytes: z.number().nonnegative() });
export const nodeStatsReply = z.object({ at_ms: z.number(), containers: z.record(z.string(), containerUsage) });
