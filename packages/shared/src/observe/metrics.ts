import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The one Prometheus registry of a process, served on the operator port (observe/operator.ts). Names follow
 * Prometheus conventions: agenthost_ prefix, base units (seconds, bytes), _total on counters. Label values are
 * drawn from fixed sets (route patterns, subjects, error codes, states): never a user, wallet, key or
 * instance id, which would leak identities to whoever reads the metrics and grow the series without bound.
 */
export const registry = new Registry();

let defaultsOn = false;

/** Process metrics (CPU, memory, event loop lag, GC) under the service's name, once per process. */
export function startProcessMetrics(service: string): void {
  if (defaultsOn) return;
  defaultsOn = true;
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry, prefix: 'agenthost_' });
}

/** Latency buckets in seconds: sub-millisecond NATS hops up to the slow Docker calls. */
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = []) =>
  new Counter<L>({ name, help, labelNames: [...labelNames], registers: [registry] });

export const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[] = [], collect?: (this: Gauge<L>) => void | Promise<void>) =>
  new Gauge<L>({ name, help, labelNames: [...labelNames], registers: [registry], ...(collect ? { collect } : {}) });

export const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[] = [], buckets = LATENCY_BUCKETS) =>
  new Histogram<L>({ name, help, labelNames: [...labelNames], buckets, registers: [registry] });

/**
 * A labelled child per label combination, made once: prom-client hashes the label object on every
 * observation otherwise, which showed in the gateway's per-request cost. Keys are the joined label values.
 */
export function children<T>(make: (...values: string[]) => T): (...values: string[]) => T {
  const cache = new Map<string, T>();
  return (...values) => {
    const key = values.join('\u0000');
    let c = cache.get(key);
    if (!c) cache.set(key, (c = make(...values)));
    return c;
  };
}

// Every service's NATS traffic, counted once in nats/endpoint.ts (served) and nats/request.ts (sent).
const served = counter('agenthost_nats_requests_total', 'NATS requests served, by subject and outcome (OK or the error code answered)', ['subject', 'outcome']);
const servedSeconds = histogram('agenthost_nats_request_duration_seconds', 'Time to handle a NATS request, by subject', ['subject']);
const sent = counter('agenthost_nats_client_requests_total', 'NATS requests sent, by subject and outcome (OK, the error code answered, or UNAVAILABLE)', [
  'subject',
  'outcome',
]);
const sentSeconds = histogram('agenthost_nats_client_request_duration_seconds', 'Time from sending a NATS request to its reply, by subject', ['subject']);

const servedChild = children((subject, outcome) => served.labels(subject!, outcome!));
const servedSecondsChild = children((subject) => servedSeconds.labels(subject!));
const sentChild = children((subject, outcome) => sent.labels(subject!, outcome!));
const sentSecondsChild = children((subject) => sentSeconds.labels(subject!));

export function observeServed(subject: string, outcome: string, seconds: number): void {
  servedChild(subject, outcome).inc();
  servedSecondsChild(subject).observe(seconds);
}

export function observeSent(subject: string, outcome: string, seconds: number): void {
  sentChild(subject, outcome).inc();
  sentSecondsChild(subject).observe(seconds);
}
