import { randomUUID } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats, startOtlpReceiver, waitFor, type NatsServer, type ReceivedSpan } from '../../testkit/src/index.ts';
import {
  AppError,
  consumeEvents,
  context,
  contracts,
  EVENT_STREAM,
  createLogger,
  publishEvent,
  ROOT_CONTEXT,
  startTracing,
  trace,
  tracer,
  type Subscription,
} from '../src/index.ts';

// A JetStream event published while serving a traced request carries the trace (traceparent in its headers), so
// the consumer's work joins the publisher's trace: request → publish → consume, in that parent order, even in
// another process and later. An event published outside any trace makes no span on either side.

const ev = contracts.provisioner.instanceDeleted;
let nats: NatsServer;
let nc: NatsConnection;
let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;
let stopTracing: (() => Promise<void>) | undefined;
let sub: Subscription | undefined;

beforeAll(async () => {
  nats = await startNats();
  nc = await nats.connect();
  otlp = await startOtlpReceiver();
  stopTracing = await startTracing({ service: 'event-trace-test', roots: 'sampled', endpoint: otlp.url, sampleRatio: 1, flushMs: 100 });
}, 120_000);

afterAll(async () => {
  await sub?.stop();
  await stopTracing?.();
  otlp?.close();
  await nc?.close();
  await nats?.stop();
});

describe('trace context in JetStream events', () => {
  it("a consumer's span joins the publisher's trace; an untraced event makes no span", async () => {
    const handled: { instance_id: string; traceId?: string }[] = [];
    sub = await consumeEvents(
      nc,
      ev,
      `trace-test-${randomUUID().slice(0, 8)}`,
      async (p) => {
        const span = trace.getSpan(context.active());
        handled.push({ instance_id: p.instance_id, ...(span ? { traceId: span.spanContext().traceId } : {}) });
      },
      createLogger('event-trace-test', 'warn'),
    );

    const user_id = randomUUID();
    const deleted_at = new Date().toISOString();
    const root = tracer.startSpan('POST /instance/delete');
    await context.with(trace.setSpan(ROOT_CONTEXT, root), () => publishEvent(nc, ev, { instance_id: 'traced-one', user_id, deleted_at }));
    root.end();
    await publishEvent(nc, ev, { instance_id: 'untraced-one', user_id, deleted_at });

    await waitFor('both events handled', async () => handled.length === 2);
    const traceId = root.spanContext().traceId;
    expect(handled.find((h) => h.instance_id === 'traced-one')?.traceId).toBe(traceId);
    expect(handled.find((h) => h.instance_id === 'untraced-one')?.traceId).toBeUndefined();

    const byName = (name: string) => otlp.spans.find((s) => s.name === name && s.traceId === traceId);
    const spans = await waitFor('the publish and consume spans exported', async () => {
      const publish = byName(`publish ${ev.subject}`);
      const consume = byName(`consume ${ev.subject}`);
      const request = byName('POST /instance/delete');
      return publish && consume && request ? { publish, consume, request } : undefined;
    });
    expect(spans.publish.parentSpanId).toBe(spans.request.spanId);
    expect(spans.consume.parentSpanId).toBe(spans.publish.spanId);
    // Only the traced event made spans: one publish and one consume in all.
    const named = (prefix: string) => otlp.spans.filter((s: ReceivedSpan) => s.name.startsWith(prefix));
    expect(named('publish ').length).toBe(1);
    expect(named('consume ').length).toBe(1);
  });

  it('a publish JetStream does not take is a retryable 503, not an unknown error', async () => {
    await sub?.stop();
    sub = undefined;
    // No stream for the subject (as while a NATS node that leads it moves): the publisher gets SERVICE_UNAVAILABLE.
    await (await nc.jetstreamManager()).streams.delete(EVENT_STREAM);
    const err = await publishEvent(nc, ev, { instance_id: 'lost-one', user_id: randomUUID(), deleted_at: new Date().toISOString() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, retryable: true });
  });
});
