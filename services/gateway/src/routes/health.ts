import { Router } from 'express';
import { contracts, request } from '@agenthost/shared';
import type { GatewayContext } from '../context.ts';

const BACKENDS = ['auth', 'billing-chain', 'provisioner', 'keyvault'] as const;

/** Liveness says the process serves HTTP; readiness says every backend answers its ping over NATS. */
export function healthRoutes(ctx: GatewayContext): Router {
  const r = Router();
  r.get('/health/live', (_req, res) => {
    res.json({ ok: true });
  });
  r.get('/health/ready', async (_req, res) => {
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
    if (ready) res.json({ ready, services });
    else res.status(503).json({ error: 'Not every backend service is answering', code: 'SERVICE_UNAVAILABLE', status: 503, ready, services });
  });
  return r;
}
