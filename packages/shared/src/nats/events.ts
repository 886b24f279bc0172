import { setTimeout as sleep } from 'node:timers/promises';
import {
  AckPolicy,
  DeliverPolicy,
  headers as natsHeaders,
  nanos,
  RetentionPolicy,
  StorageType,
  ErrorCode,
  NatsError,
  type Consumer,
  type ConsumerMessages,
  type JsMsg,
  type NatsConnection,
} from 'nats';
import type { z } from 'zod';
import type { EventContract } from '../contracts/contract.ts';
import { AppError } from '../errors.ts';
import { backoffMs, retry } from '../retry.ts';
import type { Logger } from '../logger.ts';
import { activeSpan, context, endSpan, extractTrace, injectTrace, SpanKind, trace, tracer } from '../observe/tracing.ts';
import { encode, safeDecode } from './codec.ts';

export const EVENT_STREAM = 'EVENTS';

/**
 * Create (or bring up to date) the durable stream every domain event goes to. Idempotent; every service may
 * call it. `replicas` (NATS_STREAM_REPLICAS: 3 on a NATS cluster) is set by the publishers; without it the
 * stream keeps the replica count it has.
 */
export async function ensureEventStream(nc: NatsConnection, opts: { replicas?: number } = {}): Promise<void> {
  const jsm = await nc.jetstreamManager();
  const cfg = {
    name: EVENT_STREAM,
    subjects: ['events.>'],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    max_age: nanos(14 * 24 * 3600 * 1000),
    duplicate_window: nanos(10 * 60 * 1000),
    num_replicas: opts.replicas ?? 1,
  };
  let current;
  try {
    current = (await jsm.streams.info(EVENT_STREAM)).config;
  } catch {
    await jsm.streams.add(cfg);
    return;
  }
  if (opts.replicas === undefined) cfg.num_replicas = current.num_replicas;
  // Only the services that publish events may update the stream (NATS permissions): the others
  // leave a stream whose settings are already right alone.
  const same =
    current.subjects?.join() === cfg.subjects.join() &&
    current.max_age === cfg.max_age &&
    current.duplicate_window === cfg.duplicate_window &&
    current.num_replicas === cfg.num_replicas;
  if (!same) await jsm.streams.update(EVENT_STREAM, cfg);
}

/**
 * JetStream cannot answer now (no stream or meta leader while a NATS node restarts or has lost its quorum, or no answer
 * in time), as opposed to a refusal that will not pass by itself (a permission the account lacks).
 */
export const jetStreamAway = (err: unknown): boolean =>
  err instanceof NatsError && ['503', ErrorCode.Timeout, ErrorCode.NoResponders, ErrorCode.Disconnect].includes(err.code);

/** The wait after the n-th failed attempt to set the stream or a consumer up: 1 s, doubling, at most 10 s. */
const setUpBackoff = (failed: number) => backoffMs(failed, { initialMs: 1000, maxMs: 10_000 });

/**
 * ensureEventStream at a service's start, for a service that serves requests without JetStream: while JetStream is
 * away it starts anyway and keeps trying in the background (its publishes answer a retryable 503 meanwhile), rather
 * than exiting and being restarted in a loop that would last as long as the outage. Any other failure still stops it.
 */
export async function keepEventStream(nc: NatsConnection, opts: { replicas?: number }, log: Logger): Promise<void> {
  try {
    await ensureEventStream(nc, opts);
  } catch (err) {
    if (!jetStreamAway(err)) throw err;
    log.warn({ err: String(err) }, 'the event stream cannot be set up now (JetStream unavailable); retrying in the background');
    retry(() => ensureEventStream(nc, opts), {
      delayMs: setUpBackoff,
      retryable: () => !nc.isClosed(),
      onRetry: (e) => log.warn({ err: String(e) }, 'event stream still not set up; retrying'),
      ref: false,
    }).then(
      () => log.info('event stream set up'),
      () => {}, // the connection closed: the service is stopping
    );
  }
}

/**
 * Publish an event and wait for JetStream to store it. msgId de-duplicates retries of the same event.
 */
export async function publishEvent<P extends z.ZodType>(
  nc: NatsConnection,
  ev: EventContract<P>,
  payload: z.input<P>,
  msgId?: string,
  opts: { timeoutMs?: number } = {},
): Promise<void> {
  const data = ev.payload.parse(payload);
  // Inside a traced request the event carries its trace (W3C traceparent in the message headers, as requests do:
  // nats/request.ts), so the consumers' spans join it, however much later they handle it. Otherwise no span.
  const parent = context.active();
  const span =
    activeSpan(parent) &&
    tracer.startSpan(
      `publish ${ev.subject}`,
      { kind: SpanKind.PRODUCER, attributes: { 'messaging.system': 'nats', 'messaging.destination.name': ev.subject } },
      parent,
    );
  const headers = span ? injectTrace(trace.setSpan(parent, span), undefined, natsHeaders) : undefined;
  try {
    await nc.jetstream().publish(ev.subject, encode(data), {
      ...(msgId ? { msgID: msgId } : {}),
      ...(headers ? { headers } : {}),
      ...(opts.timeoutMs ? { timeout: opts.timeoutMs } : {}),
    });
    if (span) endSpan(span);
  } catch (err) {
    if (span) endSpan(span, err);
    // JetStream did not take it (no stream leader while a NATS node moves or restarts, or no answer in time): a
    // retryable 503 for the caller, never an unknown error's 500. Whoever publishes keeps what it must publish again.
    throw new AppError('SERVICE_UNAVAILABLE', 'The event stream is unavailable; retry shortly', { retryable: true, retryAfter: 2, cause: err });
  }
}

/** Run an event's handler, inside a consumer span of the publisher's trace when the message carries one. */
async function handleTraced(m: JsMsg, subject: string, handle: () => Promise<void>): Promise<void> {
  const parent = extractTrace(m.headers);
  if (!parent) return handle();
  const span = tracer.startSpan(
    `consume ${subject}`,
    { kind: SpanKind.CONSUMER, attributes: { 'messaging.system': 'nats', 'messaging.destination.name': subject } },
    parent,
  );
  try {
    await context.with(trace.setSpan(parent, span), handle);
    endSpan(span);
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}

export interface Subscription {
  stop(): Promise<void>;
}

/**
 * Consume an event subject through a durable consumer: a service that was down when the event
 * happened still gets it. A message is acked only after the handler resolves; a throw redelivers it
 * after a delay. Payloads that break the contract are logged and dropped (terminated), not retried forever.
 */
export async function consumeEvents<P extends z.ZodType>(
  nc: NatsConnection,
  ev: EventContract<P>,
  durable: string,
  handler: (payload: z.output<P>) => Promise<void>,
  log: Logger,
): Promise<Subscription> {
  const setUp = async (): Promise<Consumer> => {
    await ensureEventStream(nc);
    const jsm = await nc.jetstreamManager();
    try {
      await jsm.consumers.info(EVENT_STREAM, durable);
    } catch (err) {
      if (jetStreamAway(err)) throw err;
      await jsm.consumers.add(EVENT_STREAM, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        filter_subject: ev.subject,
        ack_wait: nanos(30_000),
        max_deliver: -1,
      });
    }
    return nc.jetstream().consumers.get(EVENT_STREAM, durable);
  };
  // Set up at once when JetStream answers; while it is away (keepEventStream) the service starts all the same, and
  // the consumer is set up when it is back: durable, so the events published meanwhile are delivered then.
  let consumer: Consumer | undefined = await setUp().catch((err) => {
    if (!jetStreamAway(err)) throw err;
    log.warn({ err: String(err), durable }, 'event consumer cannot be set up now (JetStream unavailable); retrying in the background');
    return undefined;
  });
  let messages: ConsumerMessages | undefined;
  let stopped = false;
  let setUpFailures = 0;
  const halt = new AbortController();
  const pause = (ms: number) => sleep(ms, undefined, { signal: halt.signal }).catch(() => {});
  const loop = (async () => {
    while (!stopped) {
      try {
        if (!consumer) {
          consumer = await setUp().catch((err) => {
            log.warn({ err: String(err), durable }, 'event consumer still not set up; retrying');
            return undefined;
          });
          if (!consumer) {
            await pause(setUpBackoff(++setUpFailures));
            continue;
          }
          log.info({ durable }, 'event consumer set up');
          setUpFailures = 0;
        }
        messages = await consumer.consume({ max_messages: 64 });
        for await (const m of messages) {
          const parsed = ev.payload.safeParse(safeDecode(m.data));
          if (!parsed.success) {
            log.error({ subject: m.subject, seq: m.seq }, 'dropping event that breaks its contract');
            m.term();
            continue;
          }
          try {
            await handleTraced(m, m.subject, () => handler(parsed.data));
            m.ack();
          } catch (err) {
            log.warn({ err, subject: m.subject, seq: m.seq }, 'event handler failed; will be redelivered');
            m.nak(2000);
          }
        }
      } catch (err) {
        if (!stopped) log.warn({ err }, 'event consumer interrupted; resuming');
        // Set up again: the consumer (or the whole stream) may be gone, and is made again as it was.
        consumer = undefined;
      }
      if (!stopped) await pause(500);
    }
  })();
  return {
    async stop() {
      stopped = true;
      halt.abort();
      messages?.stop();
      await loop.catch(() => {});
    },
  };
}
