import { contracts, request } from '@agenthost/shared';
import type { GatewayContext } from '../../context.ts';
import { StreamReader } from '../../domain/stream-reader.ts';
import type { Route } from '../route.ts';

const BACKENDS = ['auth', 'billing-chain', 'provisioner', 'keyvault'] as const;

/**
 * Liveness says the process serves HTTP; readiness says every backend answers its ping over NATS. It also says whether
 * the event stream answers (JetStream: events, webhooks, creates and deletes need it), without making the gateway
 * unready: sign-in, status and keys work without it. `deploy/swarm` waits for it after a deploy.
 */
export const healthRoutes = (ctx: GatewayContext): Route[] => [
  { method: 'get', path: '/health/live', access: 'public', summary: 'Liveness', internal: true, handler: () => ({ ok: true }) },
  {
    method: 'get',
    path: '/health/ready',
    access: 'public',
    summary: 'Readiness: every backend answers over NATS',
    internal: true,
    handler: async ({ res }) => {
      const eventsP = new StreamReader(ctx.nc, 1000).bounds().then(
        () => 'ok' as const,
        () => 'unavailable' as const,
      );
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
      const events = await eventsP;
      if (ready) return { ready, services, events };
      res.statusCode = 503;
      return { error: 'Not every backend service is answering', code: 'SERVICE_UNAVAILABLE', status: 503, ready, services, events };
    },
  },
];
