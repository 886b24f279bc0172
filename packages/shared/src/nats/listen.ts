import type { Msg, NatsConnection, Subscription } from 'nats';
import type { z } from 'zod';
import type { Logger } from '../logger.ts';
import { safeDecode } from './codec.ts';

/** What a listener hears: a subject and the schema of its messages. An EventContract is one. */
export interface Listened<T = unknown> {
  subject: string;
  payload: z.ZodType<T>;
}

/**
 * Listen to a subject on a core subscription (no stream state: a hint, or an answer to a request-many): each
 * message is parsed with the schema, one that breaks it is logged and dropped, and the handler gets the parsed
 * payload and the message (to respond). A handler's throw or rejection is logged, never left unhandled: one bad
 * message must not end the subscription or the process. `unsubscribe()` on the answer ends it.
 */
export function listen<T>(nc: NatsConnection, on: Listened<T>, handler: (payload: T, msg: Msg) => unknown, log: Logger | undefined): Subscription {
  const failed = (err: unknown) => log?.warn({ err, subject: on.subject }, 'listener failed on a message');
  return nc.subscribe(on.subject, {
    callback: (err, msg) => {
      if (err) return void log?.warn({ err: err.message, subject: on.subject }, 'subscription failed');
      const parsed = on.payload.safeParse(safeDecode(msg.data));
      if (!parsed.success) return void log?.warn({ subject: msg.subject }, 'dropping a message that breaks its contract');
      try {
        void Promise.resolve(handler(parsed.data, msg)).catch(failed);
      } catch (e) {
        failed(e);
      }
    },
  });
}
