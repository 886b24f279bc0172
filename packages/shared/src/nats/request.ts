import { setTimeout as sleep } from 'node:timers/promises';
import { headers as natsHeaders, type MsgHdrs, type NatsConnection } from 'nats';
import type { z } from 'zod';
import type { Contract } from '../contracts/contract.ts';
import { AppError } from '../errors.ts';
import { zodToAppError } from '../validate.ts';
import { ASSERTION_HEADER, type AssertionSigner } from './assertion.ts';
import { busConnected } from './connect.ts';
import { decode, encode, type Reply } from './codec.ts';
import { NoReplyError, requestReply } from './replies.ts';
import { observeSent } from '../observe/metrics.ts';
import { activeSpan, context, endSpan, injectTrace, SpanKind, trace, tracer, type Context } from '../observe/tracing.ts';

export interface RequestOptions {
  timeoutMs?: number;
  requestId?: string;
  /** The gateway's signer: a contract that acts for a user gets an assertion for the user_id of its input. */
  asserter?: AssertionSigner;
}

/**
 * Call a contract's subject and return its parsed reply, or throw the AppError it carried.
 * No responder, a timeout or a closed connection become SERVICE_UNAVAILABLE (503, retryable).
 */
export async function request<C extends Contract>(
  nc: NatsConnection,
  c: C,
  input: z.input<C['input']>,
  opts: RequestOptions = {},
): Promise<z.output<C['output']>> {
  // Counted and traced here, once, for every service: the span is the parent of the endpoint's on the far side.
  const started = performance.now();
  const parent = context.active();
  // A span only inside a traced request (work outside one, and untraced requests, send no traceparent).
  const span =
    activeSpan(parent) &&
    tracer.startSpan(
      `nats ${c.subject}`,
      { kind: SpanKind.CLIENT, attributes: { 'messaging.system': 'nats', 'messaging.destination.name': c.subject } },
      parent,
    );
  try {
    // Nothing under send() makes spans: the span's context goes to the headers only, without making it active.
    const out = await send(nc, c, input, opts, span ? trace.setSpan(parent, span) : undefined);
    observeSent(c.subject, 'OK', (performance.now() - started) / 1000);
    if (span) endSpan(span);
    return out;
  } catch (err) {
    observeSent(
      c.subject,
      (err as { code?: string }).code === 'SERVICE_UNAVAILABLE' ? 'UNAVAILABLE' : ((err as { code?: string }).code ?? 'INTERNAL'),
      (performance.now() - started) / 1000,
    );
    if (span) endSpan(span, err);
    throw err;
  }
}

async function send<C extends Contract>(
  nc: NatsConnection,
  c: C,
  input: z.input<C['input']>,
  opts: RequestOptions,
  traced: Context | undefined,
): Promise<z.output<C['output']>> {
  const parsed = c.input.safeParse(input);
  if (!parsed.success) throw zodToAppError(parsed.error);
  // A client whose server went away reconnects to another node of the cluster within a few hundred ms: the
  // request waits that long rather than failing, and fails fast (503) when the whole bus is gone.
  if (!busConnected(nc)) await reconnected(nc, Math.min(RECONNECT_WAIT_MS, opts.timeoutMs ?? 5000));
  if (!busConnected(nc)) {
    throw new AppError('SERVICE_UNAVAILABLE', 'The message bus (NATS) is unavailable; retry shortly', { retryable: true, retryAfter: 1 });
  }
  let h: MsgHdrs | undefined;
  if (opts.requestId) {
    h = natsHeaders();
    h.set('x-request-id', opts.requestId);
  }
  const body = encode(parsed.data);
  const userId = (parsed.data as { user_id?: unknown }).user_id;
  if (c.assertion && opts.asserter && typeof userId === 'string') {
    h ??= natsHeaders();
    h.set(ASSERTION_HEADER, opts.asserter.sign(userId, c.subject, body, c.read === true));
  }
  if (traced) h = injectTrace(traced, h, natsHeaders);
  let data: Uint8Array;
  try {
    data = await requestReply(nc, c.subject, body, opts.timeoutMs ?? 5000, h);
  } catch (err) {
    throw unavailable(c.subject, err);
  }
  const reply = decode(data) as Reply | undefined;
  if (!reply || typeof reply !== 'object') throw new AppError('INTERNAL', undefined, { cause: new Error(`empty reply on ${c.subject}`) });
  if (!reply.ok) throw AppError.fromWire(reply.error);
  const out = c.output.safeParse(reply.result);
  if (!out.success) throw new AppError('INTERNAL', undefined, { cause: new Error(`reply on ${c.subject} broke its contract: ${out.error.message}`) });
  return out.data as z.output<C['output']>;
}

const RECONNECT_WAIT_MS = 500;

async function reconnected(nc: NatsConnection, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!busConnected(nc) && !nc.isClosed() && Date.now() < end) await sleep(25);
}

function unavailable(subject: string, err: unknown): AppError {
  const reason = err instanceof NoReplyError ? err.reason : 'closed';
  const service = subject.split('.')[0];
  const why = reason === 'no-responders' ? 'is not running' : reason === 'timeout' ? 'did not answer in time' : 'cannot be reached';
  // details.notRunning: no replica is subscribed right now (restarting), unlike a timeout (a replica took it).
  return new AppError('SERVICE_UNAVAILABLE', `The ${service} service ${why}; retry shortly`, {
    retryable: true,
    retryAfter: 1,
    cause: err,
    ...(reason === 'no-responders' ? { details: { notRunning: true } } : {}),
  });
}
