import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DockerEngine } from '../docker/engine.ts';
import { o } from '../docker/call.ts';
import { nodeAddr } from './placement.ts';

/**
 * Wait until an instance's host-mode port is free again on the nodes its removed service ran on. Once a service is
 * removed the manager drops its tasks from the task list before the node has stopped their containers, and the old
 * container keeps the port meanwhile: a recreated service's task is then refused ("host-mode port already in use")
 * and, worse, a readiness probe is answered by the old agent. Free = the port refuses connections (nothing listens,
 * not even the engine's proxy). Gives up at the deadline (the new task then waits for the swarm's own retry).
 */
export async function waitPortReleased(engine: DockerEngine, nodeIds: string[], port: number, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  const nodes = await engine.run('node list', (abortSignal) => engine.docker.listNodes(o({ abortSignal }))).catch(() => []);
  for (const id of new Set(nodeIds)) {
    const node = nodes.find((n) => n.ID === id);
    const addr = node ? nodeAddr(node) : '';
    if (!addr) continue;
    while (Date.now() < end && (await accepts(addr, port))) await sleep(200);
  }
}

/** True when something accepts a TCP connection at addr:port within a second (a timeout counts as free). */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port, timeout: 1000 });
    const done = (v: boolean) => {
      s.destroy();
      resolve(v);
    };
    s.once('connect', () => done(true));
    s.once('timeout', () => done(false));
    s.once('error', () => done(false));
  });
}
