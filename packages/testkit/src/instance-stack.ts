import { cleanupDocker, testNetwork } from './docker.ts';
import { gatewayEnv, provisionerEnv } from './provisioner-env.ts';
import { startStack, type Stack } from './stack.ts';
import { subscribe } from './subscribe.ts';
import { signIn, type Session } from './wallet.ts';

/**
 * A whole system for a suite that drives real instances through the gateway: every backend, the stand-in agent
 * image as "openclaw", its own Docker network and port range, and pro subscribers on demand.
 */
export async function instanceStack(file: string, ports: [number, number], gateway: Record<string, string> = {}, provisioner: Record<string, string> = {}) {
  const network = testNetwork(file);
  await cleanupDocker(network);
  const stack: Stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    serviceEnv: { provisioner: provisionerEnv({ network, ports, extra: provisioner }), gateway: { ...gatewayEnv, ...gateway } },
  });
  return {
    stack,
    async subscriber(): Promise<Session> {
      const s = await signIn(stack.api);
      await subscribe(stack, s, { tier: 'pro' });
      return s;
    },
    async stop(): Promise<void> {
      await stack.stop();
      await cleanupDocker(network);
    },
  };
}
