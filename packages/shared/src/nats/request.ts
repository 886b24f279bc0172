import { ErrorCode as NatsErrorCode, headers as natsHeaders, type NatsConnection, type NatsError } from 'nats';
import type { z } from 'zod';
import type { Contract } from '../contracts/contract.ts';
import { AppError } from '../errors.ts';
import { zodToAppError } from '../validate.ts';
import { busConnected } from './connect.ts';
import { decode, encode, type Reply } from './codec.ts';

export interface RequestOptions {
  timeoutMs?: number;
  requestId?: string;
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
  const parsed = c.input.safeParse(input);
  if (!parsed.success) throw zodToAppError(parsed.error);
  if (!busConnected(nc)) {
    throw new AppError('SERVICE_UNAVAILABLE', 'The message bus (NATS) is unavailable; retry shortly', { retryable: true, retryAfter: 1 });
  }
  const h = natsHeaders();
  if (opts.requestId) h.set('x-request-id', opts.requestId);
  let data: Uint8Array;
  try {
    const msg = await nc.request(c.subject, encode(parsed.data), { timeout: opts.timeoutMs ?? 5000, headers: h });
    data = msg.data;
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

function unavailable(subject: string, err: unknown): AppError {
  const code = (err as NatsError | undefined)?.code;
  const service = subject.split('.')[0];
  const why =
    code === NatsErrorCode.NoResponders ? 'is not running' : code === NatsErrorCode.Timeout ? 'did not answer in time' : 'cannot be reached';
  return new AppError('SERVICE_UNAVAILABLE', `The ${service} service ${why}; retry shortly`, { retryable: true, retryAfter: 1, cause: err });
}
