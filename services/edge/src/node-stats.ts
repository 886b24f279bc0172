import type { NatsConnection } from 'nats';
import { contracts, encode, listen, type Logger } from '@agenthost/shared';
import { containerUsage } from './cgroups.ts';

const E = contracts.edge;

/**
 * Swarm only: answers the provisioner's asks for the CPU time and memory of containers on this node (its Engine API
 * reaches no other node's stats). Containers not found here are left out of the answer.
 */
export function serveNodeStats(nc: NatsConnection, o: { nodeId: string; cgroupRoot: string; log: Logger }): { unsubscribe(): void } {
  const asked = { subject: E.nodeStatsSubject(o.nodeId), payload: E.nodeStatsRequest };
  return listen(
    nc,
    asked,
    async (req, msg) => {
      const containers: Record<string, { cpu_ns: number; memory_bytes: number }> = {};
      await Promise.all(
        req.containers.map(async (id) => {
          const usage = await containerUsage(o.cgroupRoot, id);
          if (usage) containers[id] = usage;
        }),
      );
      msg.respond(encode({ at_ms: Date.now(), containers }));
    },
    o.log,
  );
}
