import { createServer, type Server } from 'node:http';

/**
 * The liveness answer of a backend service for a container health check (Docker/Swarm HEALTHCHECK): the
 * services speak only NATS, so without this the orchestrator could see a process but not whether it
 * serves. Loopback only; the check runs inside the container.
 */
export function serveHealth(port: number, healthy: () => boolean): Promise<Server> {
  const server = createServer((req, res) => {
    const ok = req.url === '/health' && healthy();
    res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ ok }));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

/** The health check command of a service image: exit 0 when /health answers 200 within 3 s. */
export const healthCheckCommand = (port: number): string[] => [
  'CMD',
  '/usr/local/bin/node',
  '-e',
  `fetch('http://127.0.0.1:${port}/health',{signal:AbortSignal.timeout(3000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))`,
];
