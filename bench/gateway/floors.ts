import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Floors } from './compare.ts';
import { spawnReady } from './processes.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * The relays the gateway is measured beside: the floor (floor.ts: node:http → NATS → echo), so what the gateway adds
 * over the least any HTTP → NATS relay costs here is measured in the same run, and the Express floor
 * (express-floor.ts): the same relay to the same echo on the gateway's libraries alone. env: the bus's (operator).
 */
export async function startFloors(env: NodeJS.ProcessEnv, logDir: string) {
  const echo = await spawnReady([path.join(here, 'floor.ts'), 'echo'], env);
  const relay = await spawnReady([path.join(here, 'floor.ts'), 'relay'], env);
  const express = await spawnReady([path.join(here, 'express-floor.ts')], { ...env, FLOOR_LOG_FILE: path.join(logDir, `floor-express-${Date.now()}.log`) });
  const floors: Floors = {
    floor: { url: `http://127.0.0.1:${String(relay.ready.port)}/` },
    'floor-express': { url: `http://127.0.0.1:${String(express.ready.port)}/api/subscription/status` },
  };
  // CPU meters by name, for the throughput slices.
  const pids = { 'floor-relay': relay.child.pid!, 'floor-echo': echo.child.pid!, 'floor-express': express.child.pid! };
  return { floors, pids, stop: () => [echo, relay, express].forEach((p) => p.child.kill('SIGTERM')) };
}
