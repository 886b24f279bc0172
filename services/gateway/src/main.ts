import { setTimeout as sleep } from 'node:timers/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { commonChecks, connect, connectNats, createLogger, loadConfig, natsIdentity, startObservability } from '@agenthost/shared';
import { buildApp } from './http/app.ts';
import { answerClientError } from './http/client-error.ts';
import { gatewayConfig } from './config.ts';
import { listenMore } from './listen.ts';
import { buildContext } from './context.ts';
import type { GatewayDB } from './db/schema.ts';
import { migrations } from './db/migrations/index.ts';

const config = loadConfig(gatewayConfig);
const log = createLogger('gateway', config.LOG_LEVEL);
process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));

const db = await connect<GatewayDB>({ url: config.DATABASE_URL, schema: 'gateway', migrations });
const nc = await connectNats(natsIdentity(config, 'gateway'), config.INSTANCE_NAME || 'gateway', log);
const ctx = buildContext({ config, log, nc, db });
ctx.entitlements.start(nc);
ctx.tokens.start();
await ctx.tokens.followRevocations();
ctx.webhooks.start(nc);
let stopping = false;
const server = createServer(buildApp(ctx));
// While stopping, no answer keeps its connection open: the client's next request opens one to another replica.
server.prependListener('request', (_req, res) => {
  if (stopping) res.shouldKeepAlive = false;
});
server.on('clientError', answerClientError);
server.listen(config.GATEWAY_PORT, config.GATEWAY_HOST);
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.requestTimeout = 30_000;
await new Promise<void>((resolve, reject) => {
  server.once('listening', resolve);
  server.once('error', reject);
});
const listeners = await listenMore(server, config, log);
const observe = await startObservability({
  service: 'gateway',
  traceRoots: 'sampled',
  config,
  log,
  nc,
  live: () => !stopping && server.listening,
  checks: commonChecks({ db, nc }),
});
const { port } = server.address() as AddressInfo;
const host = config.GATEWAY_HOST === '0.0.0.0' ? '127.0.0.1' : config.GATEWAY_HOST;
log.info({ event: 'ready', url: `http://${host}:${port}` }, `gateway listening on http://${host}:${port}/api`);

async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  const force = setTimeout(() => process.exit(1), config.SHUTDOWN_GRACE_MS + 10_000);
  force.unref();
  if (config.SHUTDOWN_GRACE_MS > 0) {
    log.info({ signal, grace_ms: config.SHUTDOWN_GRACE_MS }, 'stopping: still serving, every answer closing its connection');
    server.closeIdleConnections();
    await sleep(config.SHUTDOWN_GRACE_MS);
  }
  log.info({ signal }, 'stopping: no new connections, finishing requests in flight');
  const closed = listeners.close();
  // Key watches never end by themselves: end them so their bootstraps reconnect to another replica.
  ctx.keyReload.stop();
  ctx.instanceEvents.stop();
  server.closeIdleConnections();
  await closed;
  ctx.entitlements.stop();
  ctx.tokens.stop();
  await ctx.usage.stop();
  await ctx.webhooks.stop();
  await nc.drain().catch(() => {});
  await db.destroy();
  await observe.stop();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
