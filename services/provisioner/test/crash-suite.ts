import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import {
  spawnService,
  startStack,
  type ServiceProcess,
  type Stack,
  cleanupDocker,
  gatewayEnv,
  natsClient,
  provisionerEnv,
  testNetwork,
  waitFor,
  type Nats,
} from '@agenthost/testkit';

/** A suite that kills provisioners mid-operation: keyvault in a stack, provisioners started (and paused) by the test. */
export interface CrashSuite {
  network: string;
  stack: Stack;
  n: Nats;
  db: pg.Client;
  /** A provisioner of this suite, paused at `faultAt` (FAULT_PAUSE_AT) when given; killed after the suite. */
  provisioner(faultAt?: string): Promise<ServiceProcess>;
}

export function crashSuite(file: string, ports: [number, number], hooks: { before?: () => Promise<void>; after?: () => Promise<void> } = {}): CrashSuite {
  const procs: ServiceProcess[] = [];
  const s = { network: testNetwork(file) } as CrashSuite;
  s.provisioner = async (faultAt = '') => {
    const p = await spawnService('provisioner', {
      env: { ...s.stack.envFor('provisioner'), ...provisionerEnv({ network: s.network, ports }), FAULT_PAUSE_AT: faultAt },
      label: `provisioner-${faultAt || 'clean'}`,
    });
    procs.push(p);
    return p;
  };
  beforeAll(async () => {
    await cleanupDocker(s.network);
    await hooks.before?.();
    s.stack = await startStack({ services: ['keyvault'], serviceEnv: { gateway: gatewayEnv } });
    s.n = await natsClient(s.stack.nats);
    s.db = new pg.Client({ connectionString: s.stack.db.url });
    await s.db.connect();
  }, 300_000);
  afterAll(async () => {
    for (const p of procs) await p.kill();
    await s.db?.end();
    await s.n?.close();
    await s.stack?.stop();
    await cleanupDocker(s.network);
    await hooks.after?.();
  });
  return s;
}

/** Resolves once the provisioner logged that it paused at `point`. */
export const pausedAt = (p: ServiceProcess, point: string) =>
  waitFor(`pause at ${point}`, async () => p.lines().some((l) => l.includes('"event":"fault_pause"') && l.includes(`"point":"${point}"`)), 60_000, 25);
