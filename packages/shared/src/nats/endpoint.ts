import { headers as natsHeaders, type NatsConnection, type Service, type ServiceMsg } from 'nats';
import type { z } from 'zod';
import type { Contract } from '../contracts/contract.ts';
import { AppError, toAppError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { decode, encode } from './codec.ts';
import { zodToAppError } from '../validate.ts';

export interface HandlerContext {
  requestId: string;
  log: Logger;
}

export interface Endpoint {
  contract: Contract;
  handle: (input: any, ctx: HandlerContext) => Promise<unknown>;
}

/** Pair a contract with its handler, typed by the contract. */
export const endpoint = <C extends Contract>(
  c: C,
  handle: (input: z.output<C['input']>, ctx: HandlerContext) => Promise<z.input<C['output']>>,
): Endpoint => ({ contract: c, handle });

export interface ServeOptions {
  name: string;
  version: string;
  description?: string;
  log: Logger;
}

/**
 * Start a NATS service (so $SRV.PING/INFO/STATS work) whose endpoints share the queue group "q":
 * any number of replicas can run. Every handler is awaited inside one wrapper that turns any throw
 * into an error reply; unknown errors are logged here and sent as a generic INTERNAL.
 */
export async function serve(nc: NatsConnection, opts: ServeOptions, endpoints: Endpoint[]): Promise<Service> {
  const service = await nc.services.add({ name: opts.name, version: opts.version, description: opts.description ?? opts.name, queue: 'q' });
  for (const ep of endpoints) {
    service.addEndpoint(ep.contract.subject.replaceAll('.', '_'), {
      subject: ep.contract.subject,
      handler: (err, msg) => {
        if (err) {
          opts.log.error({ err }, 'service endpoint error');
          return;
        }
        void handleMessage(ep, msg, opts.log);
      },
      metadata: { contract: ep.contract.subject },
    });
  }
  return service;
}

async function handleMessage(ep: Endpoint, msg: ServiceMsg, rootLog: Logger): Promise<void> {
  const requestId = msg.headers?.get('x-request-id') || '';
  // The child logger is made only when something is logged: most requests log nothing.
  let child: Logger | undefined;
  const log = () => (child ??= rootLog.child({ subject: ep.contract.subject, ...(requestId ? { request_id: requestId } : {}) }));
  const started = performance.now();
  try {
    let raw: unknown;
    try {
      raw = decode(msg.data) ?? {};
    } catch {
      throw new AppError('INVALID_JSON');
    }
    const parsed = ep.contract.input.safeParse(raw);
    if (!parsed.success) throw zodToAppError(parsed.error);
    const result = ep.contract.output.parse(
      await ep.handle(parsed.data, {
        requestId,
        get log() {
          return log();
        },
      }),
    );
    msg.respond(encode({ ok: true, result }));
    if (rootLog.isLevelEnabled('debug')) log().debug({ ms: Math.round(performance.now() - started) }, 'handled');
  } catch (err) {
    const appErr = toAppError(err);
    if (appErr.status >= 500) log().error({ err, code: appErr.code }, 'request failed');
    else log().info({ code: appErr.code, msg_text: appErr.message }, 'request refused');
    const h = natsHeaders();
    h.set('Nats-Service-Error-Code', String(appErr.status));
    h.set('Nats-Service-Error', appErr.code);
    msg.respond(encode({ ok: false, error: appErr.toWire() }), { headers: h });
  }
}
