import { contracts, request } from '@agenthost/shared';
import type { GatewayContext } from '../context.ts';
import type { Router } from '../http/router.ts';

const BACKENDS = ['auth', 'billing-chain', 'provisioner', 'keyvault'] as const;

/** Liveness says the process serves HTTP; readiness says every backend answers its ping over NATS. */
export function healthRoutes(ctx: GatewayContext, r: Router): void {
  r.add('get', '/health/live', () => ({ ok: true }));
  r.add('get', '/health/ready', async (_req, res) => {
    const checks = await Promise.all(
      BACKENDS.map(async (name) => {
        try {
          await request(ctx.nc, contracts.ping.pingFor(name), {}, { timeoutMs: 1000 });
          return [name, 'ok'] as const;
        } catch {
          return [name, 'unavailable'] as const;
        }
      }),
    );
    const ready = checks.every(([, s]) => s === 'ok');
    const services = Object.fromEntries(checks);
    if (ready) return { ready, services };
    res.statusCode = 503;
    return { error: 'Not every backend service is answering', code: 'SERVICE_UNAVAILABLE', status: 503, ready, services };
  });
}
