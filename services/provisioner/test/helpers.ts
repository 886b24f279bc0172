import { randomBytes } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll } from 'vitest';
import { cleanupDocker, gatewayEnv, natsClient, provisionerEnv, startStack, testNetwork, waitFor, type Nats, type Stack } from '@agenthost/testkit';
import { contracts, createLogger, endpoint, serve } from '@agenthost/shared';

// The provisioner's own suites only. What other packages' tests share (docker, the stand-in image, provisionerEnv,
// natsClient, ...) is in packages/testkit (src/docker.ts, src/provisioner-env.ts).

/**
 * A stand-in for keyvault's credentials.issue only (used where a test needs to make keyvault fail or
 * count calls); other tests run the real keyvault service.
 */
export async function fakeKeyvault(nc: NatsConnection): Promise<{ calls: number; stop(): Promise<void> }> {
  const state = { calls: 0 };
  const service = await serve(nc, { name: 'keyvault', version: '0.0.0', log: createLogger('fake-keyvault', 'silent') }, [
    endpoint(contracts.keyvault.issueCredentials, async () => {
      state.calls++;
      return { instance_secret: randomBytes(24).toString('base64url'), instance_key: randomBytes(32).toString('base64'), key_id: 'test' };
    }),
    endpoint(contracts.keyvault.purgeInstance, async () => ({ keys_deleted: 0 })),
  ]);
  return {
    get calls() {
      return state.calls;
    },
    stop: async () => {
      await service.stop();
    },
  };
}

/** Waits until the instance runs; a failed one is reported at once, with the last lines of its agent's log. */
export const waitRunning = (n: Nats, user_id: string, instance_id: string, timeoutMs = 30_000) =>
  waitFor(
    `${instance_id} running`,
    async () => {
      const v = await n.call(contracts.provisioner.get, { user_id, instance_id });
      if (v.status === 'failed') {
        const { lines } = await n.call(contracts.provisioner.logs, { user_id, instance_id, tail: 40 });
        throw new Error(`failed: ${v.failure_reason}\n${lines.join('\n')}`);
      }
      return v.status === 'running' ? v : undefined;
    },
    timeoutMs,
    250,
  );

export interface InstanceSuite {
  network: string;
  stack: Stack;
  n: Nats;
}

/**
 * keyvault and the provisioner of one test file (its own network and host ports), started before its tests and
 * removed after them, Docker leftovers included. `extra` is added to the provisioner's settings.
 */
export function instanceSuite(file: string, ports: [number, number], extra: Record<string, string> = {}): InstanceSuite {
  const s = { network: testNetwork(file) } as InstanceSuite;
  beforeAll(async () => {
    await cleanupDocker(s.network);
    s.stack = await startStack({
      services: ['keyvault', 'provisioner'],
      serviceEnv: { provisioner: provisionerEnv({ network: s.network, ports, extra }), gateway: gatewayEnv },
    });
    s.n = await natsClient(s.stack.nats);
  }, 180_000);
  afterAll(async () => {
    await s.n?.close();
    await s.stack?.stop();
    await cleanupDocker(s.network);
  });
  return s;
}
