import { createServer, type Server } from 'node:http';
import { registry } from './metrics.ts';

/** A readiness check: resolves true when the dependency answers. */
export type Check = () => boolean | Promise<boolean>;

export interface OperatorOptions {
  port: number;
  host: string;
  /** False once the process is stopping: liveness then fails too, so no orchestrator waits on it. */
  live: () => boolean;
  /** What this service needs to serve (postgres, nats, docker): /readyz is 200 only when every one answers. */
  checks: Record<string, Check>;
  /** Also serve /metrics (the operator port); the container health check port serves health only. */
  metrics: boolean;
}

const CHECK_TIMEOUT_MS = 2000;

export async function runCheck(check: Check): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      Promise.resolve().then(check),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), CHECK_TIMEOUT_MS);
      }),
    ]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The operator's port of a service: GET /metrics (Prometheus text), /livez (the process serves), /readyz
 * (each dependency answers; the body names which do not) and /health (= /livez, for the container health
 * checks written before /livez). It is a port of its own, on 127.0.0.1 unless configured otherwise, so the
 * public edge, which proxies only the gateway's API port, never serves it.
 */
export function serveOperator(opts: OperatorOptions): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, body: string, type = 'application/json') => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, '{"error":"method not allowed"}');
    if (path === '/livez' || path === '/health') {
      const ok = opts.live();
      return send(ok ? 200 : 503, JSON.stringify({ ok }));
    }
    if (path === '/readyz') {
      void (async () => {
        const names = Object.keys(opts.checks);
        const results = await Promise.all(names.map((n) => runCheck(opts.checks[n]!)));
        const checks = Object.fromEntries(names.map((n, i) => [n, results[i] ? 'ok' : 'failing']));
        const ok = opts.live() && results.every(Boolean);
        send(ok ? 200 : 503, JSON.stringify({ ok, checks }));
      })();
      return;
    }
    if (path === '/metrics' && opts.metrics) {
      void registry.metrics().then(
        (text) => send(200, text, registry.contentType),
        () => send(500, '{"error":"metrics failed"}'),
      );
      return;
    }
    send(404, '{"error":"not found"}');
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve(server));
  });
}
