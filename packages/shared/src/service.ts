import type { Kysely, Migration } from 'kysely';
import type { NatsConnection } from 'nats';
import type { z } from 'zod';
import { loadConfig, type BaseConfig } from './config.ts';
import { pingFor } from './contracts/ping.ts';
import { commonChecks, startObservability, type Check } from './observe/index.ts';
import { connect } from './db.ts';
import { createLogger, type Logger } from './logger.ts';
import { connectNats, natsIdentity } from './nats/connect.ts';
import { AssertionVerifier } from './nats/assertion.ts';
import { endpoint, serve, type Endpoint } from './nats/endpoint.ts';

export interface ServiceParts {
  endpoints: Endpoint[];
  /** Background work (consumers, reconcilers, keepers) started after the endpoints serve. */
  start?: () => Promise<void>;
  /** Called on SIGTERM/SIGINT before NATS drains and the pool closes. */
  stop?: () => Promise<void>;
  /** Readiness checks beyond Postgres and NATS (the provisioner's Docker engine), for /readyz. */
  checks?: Record<string, Check>;
}

export interface ServiceDefinition<S extends z.ZodType<BaseConfig>, DB> {
  name: string;
  version: string;
  config: S;
  /** Postgres schema owned by this service; omit for services without a database. */
  db?: { schema: string; migrations: Record<string, Migration> };
  build: (deps: { config: z.output<S>; log: Logger; nc: NatsConnection; db: Kysely<DB> }) => Promise<ServiceParts>;
}

/** The main of every service: config → logger → Postgres (migrated) → NATS → serve; SIGTERM drains and stops. */
export async function runService<S extends z.ZodType<BaseConfig>, DB>(def: ServiceDefinition<S, DB>): Promise<void> {
  const config = loadConfig(def.config);
  const log = createLogger(def.name, config.LOG_LEVEL);
  process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));
  const db = def.db ? await connect<DB>({ url: config.DATABASE_URL, ...def.db }) : (undefined as unknown as Kysely<DB>);
  const nc = await connectNats(natsIdentity(config, def.name), config.INSTANCE_NAME || def.name, log);
  const parts = await def.build({ config: config as z.output<S>, log, nc, db });
  const ping = endpoint(pingFor(def.name), async () => ({ service: def.name, ok: true, version: def.version }));
  const assertions =
    config.ASSERTIONS === 'off'
      ? ('unchecked' as const)
      : config.GATEWAY_ASSERTION_PUBLIC_KEYS.length
        ? new AssertionVerifier(config.GATEWAY_ASSERTION_PUBLIC_KEYS)
        : undefined;
  if (config.ASSERTIONS === 'off')
    log.warn({ event: 'assertions_off' }, 'ASSERTIONS=off: user ids on the bus are believed without the gateway signature (benchmarks only)');
  const service = await serve(nc, { name: def.name, version: def.version, log, ...(assertions ? { assertions } : {}) }, [ping, ...parts.endpoints]);
  try {
    await parts.start?.();
  } catch (err) {
    // A replica whose start fails takes no more requests from its queue group (a healthy one gets them) while it exits.
    await service.stop().catch(() => {});
    throw err;
  }
  // The subscriptions are sent to the server asynchronously: one round trip makes sure it has them, so "ready"
  // means a request sent now is answered (not "no responders" from a service that logged ready a moment early).
  await nc.flush();
  let stopping = false;
  const observe = await startObservability({
    service: def.name,
    config,
    log,
    nc,
    live: () => !stopping && !nc.isClosed(),
    checks: { ...commonChecks({ db: def.db ? db : undefined, nc }), ...parts.checks },
  });
  log.info({ event: 'ready' }, `${def.name} ready`);

  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    const force = setTimeout(() => process.exit(1), 10_000);
    force.unref();
    try {
      await service.stop();
      await parts.stop?.();
      await nc.drain();
      await db?.destroy();
      await observe.stop();
    } catch (err) {
      log.error({ err }, 'error while stopping');
    }
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}
