import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';
import type { MsgHdrs } from 'nats';

/**
 * OpenTelemetry for every process. Off unless an OTLP endpoint is configured: the API then stays the no-op
 * it is by default, and a span costs one small object. On, one trace follows a request from the gateway's
 * HTTP span through each NATS hop (W3C traceparent in the message headers: there is no NATS instrumentation
 * on npm, so nats/request.ts injects it and nats/endpoint.ts extracts it) to the Postgres queries (db.ts)
 * and Docker calls (the provisioner's engine) made while serving it.
 */
export const tracer = trace.getTracer('agenthost');

export interface TracingOptions {
  service: string;
  /** OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT); traces go to <endpoint>/v1/traces. */
  endpoint: string | undefined;
  /** Share of new traces kept; a request that arrives with a sampled parent is always kept (parent-based). */
  sampleRatio: number;
  /** How long spans are batched before they are sent (OTEL_BSP_SCHEDULE_DELAY). */
  flushMs: number;
}

/** Start the SDK when an endpoint is configured; returns its shutdown (which flushes what is buffered). */
export async function startTracing(opts: TracingOptions): Promise<(() => Promise<void>) | undefined> {
  if (!opts.endpoint) return undefined;
  // Loaded only when used: the SDK and its exporters take a while to import.
  const [{ NodeSDK }, { OTLPTraceExporter }, sdkTrace, { W3CTraceContextPropagator }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/core'),
  ]);
  const exporter = new OTLPTraceExporter({ url: `${opts.endpoint.replace(/\/+$/, '')}/v1/traces` });
  const sdk = new NodeSDK({
    serviceName: opts.service,
    spanProcessors: [new sdkTrace.BatchSpanProcessor({ exporter, scheduledDelayMillis: opts.flushMs })],
    sampler: new sdkTrace.ParentBasedSampler({ root: new sdkTrace.TraceIdRatioBasedSampler(opts.sampleRatio) }),
    textMapPropagator: new W3CTraceContextPropagator(),
    instrumentations: [],
    metricReaders: [],
    logRecordProcessors: [],
    resourceDetectors: [],
  });
  sdk.start();
  return () => sdk.shutdown();
}

const setter = { set: (h: MsgHdrs, key: string, value: string) => h.set(key, value) };
const getter = {
  get: (h: MsgHdrs, key: string) => h.get(key) || undefined,
  keys: (h: MsgHdrs) => h.keys(),
};

/** Whether spans are recorded in this context: when not, no header is written. */
const traced = (span: Span): boolean => span.spanContext().traceFlags !== 0 || span.isRecording();

/** Put the context's traceparent into NATS headers (made when needed); returns the headers to send. */
export function injectTrace(ctx: Context, h: MsgHdrs | undefined, make: () => MsgHdrs): MsgHdrs | undefined {
  const span = trace.getSpan(ctx);
  if (!span || !trace.isSpanContextValid(span.spanContext())) return h;
  const out = h ?? make();
  propagation.inject(ctx, out, setter);
  return out;
}

/** The context a received NATS message carries (its traceparent), or the root context. */
export const extractTrace = (h: MsgHdrs | undefined): Context => (h ? propagation.extract(ROOT_CONTEXT, h, getter) : ROOT_CONTEXT);

/** The trace id to write beside a request id in the logs, when the request is traced. */
export function traceIdOf(ctx: Context = context.active()): string | undefined {
  const span = trace.getSpan(ctx);
  return span && traced(span) ? span.spanContext().traceId : undefined;
}

/** End a span with the outcome of the work it covered. */
export function endSpan(span: Span, err?: unknown): void {
  if (err !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: (err as { code?: string }).code ?? (err as Error)?.name ?? 'error' });
  span.end();
}

/** Run fn inside a child span of the active context (a Docker call, a chain RPC). */
export async function inSpan<T>(name: string, attributes: Attributes, fn: () => Promise<T>, kind: SpanKind = SpanKind.CLIENT): Promise<T> {
  const parent = context.active();
  const span = tracer.startSpan(name, { kind, attributes }, parent);
  try {
    const out = await context.with(trace.setSpan(parent, span), fn);
    endSpan(span);
    return out;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}

/**
 * A span for work that already happened (a Postgres query, reported by kysely once it finished), as a child
 * of the active context; nothing when no span is active there (background work outside any request).
 */
export function pastSpan(name: string, attributes: Attributes, seconds: number, err?: unknown): void {
  const parent = context.active();
  const active = trace.getSpan(parent);
  if (!active || !active.isRecording()) return;
  const end = Date.now();
  const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes, startTime: end - seconds * 1000 }, parent);
  if (err !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: (err as { code?: string }).code ?? 'error' });
  span.end(end);
}

export { context, ROOT_CONTEXT, SpanKind, trace };
export type { Context, Span };
