import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { basename } from 'node:path';
import { sql, type Kysely } from 'kysely';
import type { NatsConnection } from 'nats';
import type { BaseConfig } from '../config.ts';
import type { Logger } from '../logger.ts';
import { busConnected } from '../nats/connect.ts';
import { gauge, startProcessMetrics } from './metrics.ts';
import { runCheck, serveOperator, type Check } from './operator.ts';
import { startTracing } from './tracing.ts';

export * from './metrics.ts';
export * from './tracing.ts';
export { serveOperator, type Check } from './operator.ts';

export interface Observability {
  /** Close the operator ports and flush the spans still buffered. */
  stop(): Promise<void>;
}

/** The readiness checks most services share: their Postgres answers a query, their NATS connection is up. */
// biome-ignore lint/suspicious/noExplicitAny: any service's database (each has its own schema type); only `select 1` is run on it
export function commonChecks(deps: { db?: Kysely<any> | undefined; nc: NatsConnection }): Record<string, Check> {
  return {
    ...(deps.db ? { postgres: async () => (await sql`select 1`.execute(deps.db!), true) } : {}),
    nats: () => busConnected(deps.nc),
  };
}

/**
 * Metrics, traces and health of one process, from its config: process metrics always (cheap, and served
 * only when METRICS_PORT is set), tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set, the operator port
 * (/metrics, /livez, /readyz) on METRICS_HOST:METRICS_PORT and the container health port on HEALTH_PORT.
 */
export async function startObservability(o: {
  service: string;
  /** The gateway starts traces; backends continue them (observe/tracing.ts). */
  traceRoots?: 'sampled' | 'none';
  config: BaseConfig;
  log: Logger;
  nc: NatsConnection;
  live: () => boolean;
  checks: Record<string, Check>;
}): Promise<Observability> {
  startProcessMetrics(o.service);
  // Read when scraped: 1 while the process holds a NATS connection (the "NATS disconnected" alert).
  gauge('agenthost_nats_connected', '1 while connected to a NATS server, 0 while reconnecting', [], function () {
    this.set(busConnected(o.nc) ? 1 : 0);
  });
  gauge('agenthost_ready', '1 while every readiness check passes (the /readyz answer)', [], async function () {
    const results = await Promise.all(Object.values(o.checks).map(runCheck));
    this.set(o.live() && results.every(Boolean) ? 1 : 0);
  });
  certificateExpiry([o.config.NATS_CA_FILE, ...o.config.CERTIFICATE_FILES].filter((f): f is string => !!f));
  const stopTracing = await startTracing({
    service: o.service,
    roots: o.traceRoots ?? 'none',
    endpoint: o.config.OTEL_EXPORTER_OTLP_ENDPOINT,
    sampleRatio: o.config.TRACE_SAMPLE_RATIO,
    flushMs: o.config.OTEL_BSP_SCHEDULE_DELAY,
  });
  const servers: Server[] = [];
  if (o.config.METRICS_PORT) {
    servers.push(await serveOperator({ port: o.config.METRICS_PORT, host: o.config.METRICS_HOST, live: o.live, checks: o.checks, metrics: true }));
    o.log.info(
      { event: 'operator_port', metrics: `http://${o.config.METRICS_HOST}:${o.config.METRICS_PORT}/metrics` },
      'metrics and health on the operator port',
    );
  }
  if (o.config.HEALTH_PORT && o.config.HEALTH_PORT !== o.config.METRICS_PORT) {
    servers.push(await serveOperator({ port: o.config.HEALTH_PORT, host: '127.0.0.1', live: o.live, checks: o.checks, metrics: false }));
  }
  if (stopTracing) o.log.info({ event: 'tracing', sample_ratio: o.config.TRACE_SAMPLE_RATIO }, 'traces exported over OTLP');
  return {
    async stop() {
      for (const s of servers) s.close();
      await stopTracing?.().catch((err: unknown) => o.log.warn({ err }, 'flushing traces failed'));
    },
  };
}

/**
 * When each certificate this process relies on expires (read from its file at every scrape, so a renewed
 * file shows at once). Labelled by file name: the NATS CA by default, and CERTIFICATE_FILES (e.g. the NATS
 * server's certificate, the edge's) where the operator lists them.
 */
function certificateExpiry(files: string[]): void {
  if (files.length === 0) return;
  gauge('agenthost_certificate_expiry_timestamp_seconds', 'When a certificate expires (Unix seconds), by file name', ['certificate'], function () {
    for (const file of files) {
      try {
        this.labels(basename(file)).set(Date.parse(new X509Certificate(readFileSync(file)).validTo) / 1000);
      } catch {
        // Unreadable: no sample, rather than a misleading one; the service's own TLS use reports the real error.
      }
    }
  });
}
