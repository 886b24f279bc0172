import { headers as natsHeaders, type NatsConnection, type Service, type ServiceMsg } from 'nats';
import type { z } from 'zod';
import type { Contract } from '../contracts/contract.ts';
import { AppError, toAppError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { ASSERTION_HEADER, type AssertionVerifier } from './assertion.ts';
import { decode, encode } from './codec.ts';
import { zodToAppError } from '../validate.ts';
import { observeServed } from '../observe/metrics.ts';
import { context, endSpan, extractTrace, SpanKind, trace, tracer, traceIdOf } from '../observe/tracing.ts';

export interface HandlerContext {
  requestId: string;
  log: Logger;
  /** The user id of a verified gateway assertion (contracts with `assertion`); undefined when none came. */
  assertedUser?: string;
}

export interface Endpoint {
  contract: Contract;
  // biome-ignore lint/suspicious/noExplicitAny: each handler takes its own contract's parsed input; unknown would make every endpoint list unassignable
  handle: (input: any, ctx: HandlerContext) => Promise<unknown>;
}

/** Pair a contract with its handler, typed by the contract. */
export const endpoint = <C extends Contract>(c: C, handle: (input: z.output<C['input']>, ctx: HandlerContext) => Promise<z.input<C['output']>>): Endpoint => ({
  contract: c,
  handle,
});

export interface ServeOptions {
  name: string;
  version: string;
  description?: string;
  log: Logger;
  /**
   * Verifies the gateway's assertions on contracts that act for a user (nats/assertion.ts). Serving a contract
   * that requires one without a verifier is refused at start. 'unchecked' is for benchmarks only: the user_id
   * of the input is believed, as before assertions existed.
   */
  assertions?: AssertionVerifier | 'unchecked';
}

/**
 * Start a NATS service (so $SRV.PING/INFO/STATS work) whose endpoints share the queue group "q":
 * any number of replicas can run. Every handler is awaited inside one wrapper that turns any throw
 * into an error reply; unknown errors are logged here and sent as a generic INTERNAL.
 */
export async function serve(nc: NatsConnection, opts: ServeOptions, endpoints: Endpoint[]): Promise<Service> {
  const missing = endpoints.find((ep) => ep.contract.assertion === 'required' && !opts.assertions);
  if (missing)
    throw new Error(
      `${opts.name}: ${missing.contract.subject} acts for a user: set GATEWAY_ASSERTION_PUBLIC_KEYS (the gateway's public keys) to verify its assertions`,
    );
  const service = await nc.services.add({ name: opts.name, version: opts.version, description: opts.description ?? opts.name, queue: 'q' });
  for (const ep of endpoints) {
    service.addEndpoint(ep.contract.subject.replaceAll('.', '_'), {
      subject: ep.contract.subject,
      handler: (err, msg) => {
        if (err) {
          opts.log.error({ err }, 'service endpoint error');
          return;
        }
        // A traced request continues its trace here; any other message costs no span.
        const parent = extractTrace(msg.headers);
        const span =
          parent &&
          tracer.startSpan(
            ep.contract.subject,
            { kind: SpanKind.SERVER, attributes: { 'messaging.system': 'nats', 'messaging.destination.name': ep.contract.subject } },
            parent,
          );
        const handled = span
          ? context.with(trace.setSpan(parent, span), () => handleMessage(ep, msg, opts.log, opts.assertions))
          : handleMessage(ep, msg, opts.log, opts.assertions);
        void handled.then((outcome) => {
          if (span && outcome.error) span.setAttribute('agenthost.error_code', outcome.error.code);
          if (span) endSpan(span, outcome.error);
          tally(outcome);
        });
      },
      metadata: { contract: ep.contract.subject },
    });
  }
  const tally = endpointStats(service);
  return service;
}

interface Outcome {
  subject: string;
  seconds: number;
  error?: AppError;
}

/**
 * Count a handled request in the Prometheus metrics and in $SRV.STATS. nats.js counts an endpoint's errors
 * and processing time only around the synchronous call of its handler (a thrown error), and ours answer
 * asynchronously, so $SRV.STATS showed no errors and ~0 ms: its per-endpoint counters are kept here instead,
 * once the reply is sent (an error reply counts as an error, as the micro protocol's Nats-Service-Error does).
 */
function endpointStats(service: Service): (o: Outcome) => void {
  type Stats = {
    subject: string;
    num_requests: number;
    num_errors: number;
    processing_time: number;
    average_processing_time: number;
    last_error?: string;
    countLatency: (start: number) => void;
  };
  const handlers = (service as unknown as { handlers?: { subject: string; stats: Stats }[] }).handlers ?? [];
  const bySubject = new Map<string, Stats>();
  for (const h of handlers) {
    h.stats.countLatency = () => {}; // measured when the reply is sent, below
    bySubject.set(h.subject, h.stats);
  }
  return (o) => {
    observeServed(o.subject, o.error ? o.error.code : 'OK', o.seconds);
    const s = bySubject.get(o.subject);
    if (!s) return;
    s.num_requests++;
    s.processing_time += Math.round(o.seconds * 1e9);
    s.average_processing_time = Math.round(s.processing_time / s.num_requests);
    if (o.error) {
      s.num_errors++;
      s.last_error = `${o.error.status} ${o.error.code}`;
    }
  };
}

async function handleMessage(ep: Endpoint, msg: ServiceMsg, rootLog: Logger, assertions: ServeOptions['assertions']): Promise<Outcome> {
  const requestId = msg.headers?.get('x-request-id') || '';
  // The child logger is made only when something is logged: most requests log nothing.
  let child: Logger | undefined;
  const log = () => {
    if (child) return child;
    const traceId = traceIdOf();
    return (child = rootLog.child({
      subject: ep.contract.subject,
      ...(requestId ? { request_id: requestId } : {}),
      ...(traceId ? { trace_id: traceId } : {}),
    }));
  };
  const started = performance.now();
  const subject = ep.contract.subject;
  try {
    let raw: unknown;
    try {
      raw = decode(msg.data) ?? {};
    } catch {
      throw new AppError('INVALID_JSON');
    }
    const assertedUser = checkAssertion(ep, msg, raw, assertions);
    const parsed = ep.contract.input.safeParse(raw);
    if (!parsed.success) throw zodToAppError(parsed.error);
    const result = ep.contract.output.parse(
      await ep.handle(parsed.data, {
        requestId,
        assertedUser,
        get log() {
          return log();
        },
      }),
    );
    msg.respond(encode({ ok: true, result }));
    if (rootLog.isLevelEnabled('debug')) log().debug({ ms: Math.round(performance.now() - started) }, 'handled');
    return { subject, seconds: (performance.now() - started) / 1000 };
  } catch (err) {
    const appErr = toAppError(err);
    if (appErr.failure) log().error({ err, code: appErr.code }, 'request failed');
    else log().info({ code: appErr.code, msg_text: appErr.message }, 'request refused');
    const h = natsHeaders();
    h.set('Nats-Service-Error-Code', String(appErr.status));
    h.set('Nats-Service-Error', appErr.code);
    msg.respond(encode({ ok: false, error: appErr.toWire() }), { headers: h });
    return { subject, seconds: (performance.now() - started) / 1000, error: appErr };
  }
}

/**
 * The user a request may act for: the `sub` of the gateway's assertion, which must also be the input's
 * user_id (the body hash already binds it; this says so plainly). Undefined when the contract needs none.
 */
function checkAssertion(ep: Endpoint, msg: ServiceMsg, raw: unknown, assertions: ServeOptions['assertions']): string | undefined {
  const mode = ep.contract.assertion;
  if (!mode || !assertions) return undefined;
  const userId = (raw as { user_id?: unknown } | undefined)?.user_id;
  if (assertions === 'unchecked') return typeof userId === 'string' ? userId : undefined;
  const token = msg.headers?.get(ASSERTION_HEADER) || undefined;
  if (!token && mode === 'optional') return undefined;
  const claims = assertions.verify(token, msg.subject, msg.data, ep.contract.read === true);
  if (userId !== claims.sub) throw new AppError('ASSERTION_MISMATCH', 'Caller assertion refused: it was issued for another user');
  return claims.sub;
}
