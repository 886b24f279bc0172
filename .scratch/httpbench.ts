import { createServer } from 'node:http';
import { closedLoop } from '../bench/gateway/load.ts';
import { spawnReady, cpuSeconds } from '../bench/gateway/processes.ts';
const mode = process.argv[2];
if (mode && mode !== 'run') {
  const { createLogger } = await import('../packages/shared/src/index.ts');
  const { buildApp } = await import('../services/gateway/src/http/app.ts');
  const level = mode === 'express-nolog' ? 'warn' : 'info';
  const log = createLogger('gateway', level);
  const ctx = { config: { TRUSTED_PROXIES: [], BODY_LIMIT_BYTES: 65536 }, log } as never;
  const { apiRoutes } = await import('../services/gateway/src/http/routes/index.ts');
  const body = { wallet_address: 'x'.repeat(44), tier: 'pro', is_active: true };
  const routes = (apiRoutes as (c: unknown) => { path: string; handler: unknown }[])({ config: { NATS_REQUEST_TIMEOUT_MS: 1 }, call: () => {} }).map((r) => (r.path === '/subscription/status' ? { ...r, access: 'public', handler: () => body } : r));
  const handler = mode === 'bare' ? (_q: unknown, s: import('node:http').ServerResponse) => { s.setHeader('content-type', 'application/json; charset=utf-8'); s.end(JSON.stringify(body)); } : buildApp(ctx, routes as never);
  const server = createServer(handler as never).listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`));
} else {
  const modes = ['bare', 'express', 'express-nolog'];
  const procs: Record<string, { port: number; pid: number }> = {};
  for (const m of modes) {
    const { ready, child } = await spawnReady([new URL(import.meta.url).pathname, m], process.env);
    procs[m] = { port: Number(ready.port), pid: child.pid! };
  }
  const tot: Record<string, { n: number; cpu: number }> = {};
  for (let round = 0; round < 4; round++)
    for (const m of modes) {
      const c0 = cpuSeconds(procs[m]!.pid);
      const r = await closedLoop({ url: `http://127.0.0.1:${procs[m]!.port}/api/subscription/status` }, 16, 1500);
      const c1 = cpuSeconds(procs[m]!.pid);
      if (round === 0) continue;
      tot[m] = { n: (tot[m]?.n ?? 0) + r.requests, cpu: (tot[m]?.cpu ?? 0) + c1 - c0 };
    }
  for (const m of modes) console.log(m, 'requests', tot[m]!.n, 'server cpu µs/request', Math.round((tot[m]!.cpu / tot[m]!.n) * 1e6));
  process.exit(0);
}
