import type { NatsConnection } from 'nats';
import { contracts, encode, safeDecode, type Logger } from '@agenthost/shared';
import { containerUsage } from './cgroups.ts';

const E = contracts.edge;

/**
 * Swarm only: answers the provisioner's asks for the CPU time and memory of containers on this node (its Engine API
 * reaches no other node's stats). Containers not found here are left out of the answer.
 */
export function serveNodeStats(nc: NatsConnection, o: { nodeId: string; cgroupRoot: string; log: Logger }): { unsubscribe(): void } {
  const sub = nc.subscribe(E.nodeStatsSubject(o.nodeId), {
    callback: (err, msg) => {
      if (err) return void o.log.warn({ err: err.message }, 'node stats subscription failed');
      void (async () => {
        const parsed = E.nodeStatsRequest.safeParse(safeDecode(msg.data));
        if (!parsed.success) return void msg.respond(encode({ at_ms: Date.now(), containers: {} }));
        const containers: Record<string, { cpu_ns: number; memory_bytes: number }> = {};
        await Promise.all(
          parsed.data.containers.map(async (id) => {
            const usage = await containerUsage(o.cgroupRoot, id);
            if (usage) containers[id] = usage;
          }),
        );
        msg.respond(encode({ at_ms: Date.now(), containers }));
      })();
    },
  });
  return sub;
}
