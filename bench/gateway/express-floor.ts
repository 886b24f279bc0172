// The floor of the libraries the design card names for the gateway's HTTP side, on this machine: the floor relay of
// floor.ts (each request one NATS request to its echo process) served by Express 5 instead of bare node:http, with
// the gateway's own JSON body parser (http/body.ts) on every route, the gateway's routes mounted in its order
// (so the router walks the same list before it reaches GET /subscription/status), and one pino access line per
// request with the gateway's fields, written asynchronously to a file as the gateway's are. No auth, quota,
// validation, counting or metrics. run.ts measures it beside the plain floor: what it costs over the plain floor is
// what the mandated libraries alone cost, before any of the gateway's own work.
// Usage (run.ts starts it): node bench/gateway/express-floor.ts   (NATS_* as the floor's; FLOOR_LOG_FILE)

import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// bench/ is not a workspace package: Express from the gateway's dependencies, nats from the testkit's.
interface Req {
  url: string;
  method: string;
}
interface Res {
  locals: Record<string, unknown>;
  statusCode: number;
  setHeader(name: string, value: string): void;
  end(body?: string | Uint8Array): void;
  once(event: 'close', fn: () => void): void;
}
type Handler = (req: Req, res: Res, next: (err?: unknown) => void) => void;
interface Router {
  get(path: string, ...h: Handler[]): void;
  post(path: string, ...h: Handler[]): void;
  put(path: string, ...h: Handler[]): void;
  delete(path: string, ...h: Handler[]): void;
}
interface App extends Router {
  disable(name: string): void;
  set(name: string, value: unknown): void;
  use(...h: unknown[]): void;
  listen(port: number, host: string, cb: () => void): { address(): { port: number }; keepAliveTimeout: number };
}
const express = createRequire(path.join(repo, 'services/gateway/package.json'))('express') as { (): App; Router(): Router };
const nats = createRequire(path.join(repo, 'packages/testkit/package.json'))('nats') as { connect(o: object): Promise<unknown> };
const { natsOptions } = await import('../../packages/shared/src/nats/connect.ts');
const { relayOnce } = await import('./relay.ts');
const { createLogger } = await import('../../packages/shared/src/logger.ts');
const { jsonBodies } = await import('../../services/gateway/src/http/body.ts');

/** The gateway's routes before GET /subscription/status, in the order http/routes/index.ts mounts them. */
const BEFORE = [
  'get /health/live',
  'get /health/ready',
  'get /auth/nonce',
  'post /auth/login',
  'post /auth/logout',
  'get /auth/me',
  'post /instance/create',
  'get /instance/list',
  'get /instance/status/:instanceId',
  'post /instance/restart/:instanceId',
  'post /instance/stop/:instanceId',
  'post /instance/start/:instanceId',
  'post /instance/upgrade/:instanceId',
  'delete /instance/delete/:instanceId',
  'get /instance/logs/:instanceId',
  'get /instance/wait/:instanceId',
  'get /instance/events/:instanceId',
  'post /instance/backup/:instanceId',
  'get /instance/backups/:instanceId',
  'post /instance/restore/:instanceId',
  'post /instance/clone/:instanceId',
  'delete /instance/backup/:instanceId/:backupId',
  'get /instance/devices/:instanceId',
  'post /keys/store',
  'put /keys/update',
  'delete /keys/delete',
  'get /keys/list',
  'get /keys/audit',
  'get /keys/retrieve',
  'get /keys/watch',
  'post /keys/applied',
];

const nc = await nats.connect(natsOptions({ url: process.env.NATS_URL!, seedFile: process.env.NATS_NKEY_SEED_FILE!, caFile: process.env.NATS_CA_FILE! }));
const subject = `floor.echo.${process.env.FLOOR_PAIR ?? 'plain'}`;
const access = createLogger('floor-express', 'info', process.env.FLOOR_LOG_FILE).child({}, { redact: [] });

const app = express();
app.disable('x-powered-by');
app.disable('etag');
app.set('query parser', 'simple');
app.use(((req, res, next) => {
  const started = performance.now();
  const requestId = randomUUID();
  res.setHeader('X-Request-ID', requestId);
  res.once('close', () => {
    const ms = Math.round((performance.now() - started) * 10) / 10;
    access.info({ request_id: requestId, method: req.method, path: req.url.split('?')[0], status: res.statusCode, ms }, 'request');
  });
  next();
}) as Handler);
const router = express.Router();
const body = jsonBodies(1_048_576) as unknown as Handler;
const named =
  (pattern: string): Handler =>
  (_req, res, next) => {
    res.locals.route = pattern;
    next();
  };
const never: Handler = (_req, res) => {
  res.statusCode = 501;
  res.end();
};
for (const r of BEFORE) {
  const [method, route] = r.split(' ') as ['get' | 'post' | 'put' | 'delete', string];
  router[method](route, named(route), body, never);
}
router.get('/subscription/status', named('/subscription/status'), body, (_req, res) => relayOnce(nc, subject, res));
app.use('/api', router);
const server = app.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`));
server.keepAliveTimeout = 65_000;
