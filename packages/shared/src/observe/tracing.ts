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
  /**
   * 'sampled': this process starts traces (the gateway, one per sampled API request: sampleRoot()). 'none': it
   * only continues the traces that reach it (the backends); a message without a traceparent costs no span.
   */
  roots: 'sampled' | 'none';
  /** OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT); traces go to <endpoint>/v1/traces. */
  endpoint: string | undefined;
  /** Share of API requests traced (roots: 'sampled'). */
  sampleRatio: number;
  /** How long spans are batched before they are sent (OTEL_BSP_SCHEDULE_DELAY). */
  flushMs: number;
}

let rootRatio = 0;

/**
 * Whether to trace this API request: decided once, at the gateway, before any span exists. An untraced request
 * makes no span and sends no traceparent anywhere, so it costs nothing further in any process.
 */
export const sampleRoot = (): boolean => rootRatio > 0 && (rootRatio >= 1 || Math.random() < rootRatio);

/** Start the SDK when an endpoint is configured; returns its shutdown (which flushes what is buffered). */
export async function startTracing(opts: TracingOptions): Promise<(() => Promise<void>) | undefined> {
  if (!opts.endpoint) return undefined;
  rootRatio = opts.roots === 'sampled' ? opts.sampleRatio : 0;
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
    // Roots are sampled by sampleRoot() before they are made; everything else follows its parent.
    sampler: new sdkTrace.ParentBasedSampler({ root: opts.roots === 'sampled' ? new sdkTrace.AlwaysOnSampler() : new sdkTrace.AlwaysOffSampler() }),
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

/** The recording span of a context: work outside a traced request makes no spans. */
export function activeSpan(ctx: Context = context.active()): Span | undefined {
  const span = trace.getSpan(ctx);
  return span?.isRecording() ? span : undefined;
}

/** Put the context's traceparent into NATS headers (made when needed); returns the headers to send. */
export function injectTrace(ctx: Context, h: MsgHdrs | undefined, make: () => MsgHdrs): MsgHdrs | undefined {
  const span = trace.getSpan(ctx);
  if (!span || !trace.isSpanContextValid(span.spanContext())) return h;
  const out = h ?? make();
  propagation.inject(ctx, out, setter);
  return out;
}

/** The context a received NATS message carries (its traceparent), or undefined when it carries none. */
export const extractTrace = (h: MsgHdrs | undefined): Context | undefined => (h?.get('traceparent') ? propagation.extract(ROOT_CONTEXT, h, getter) : undefined);

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
  if (!activeSpan(parent)) return fn();
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
  if (!activeSpan(parent)) return;
  const end = Date.now();
  const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes, startTime: end - seconds * 1000 }, parent);
  if (err !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: (err as { code?: string }).code ?? 'error' });
  span.end(end);
}

export { context, ROOT_CONTEXT, SpanKind, trace };
export type { Context, Span };
