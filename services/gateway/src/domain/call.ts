import type { Contract } from '@agenthost/shared';
import type { z } from 'zod';

/** A call to a backend over NATS (the gateway's timeout and request id applied). */
export type Call = <C extends Contract>(c: C, input: z.input<C['input']>, requestId?: string) => Promise<z.output<C['output']>>;

/**
 * Calls made while the event loop handles one batch of I/O are sent together at the end of it
 * (setImmediate): the NATS client then writes them to its socket in one write instead of one per
 * request. Under load this removes most of the per-request syscalls of the hot paths; an idle
 * gateway adds nothing measurable (one loop turn).
 */
export function coalesce(call: Call): Call {
  let queue: Array<() => void> = [];
  const flush = () => {
    const run = queue;
    queue = [];
    for (const start of run) start();
  };
  return <C extends Contract>(c: C, input: z.input<C['input']>, requestId?: string) =>
    new Promise<z.output<C['output']>>((resolve, reject) => {
      if (queue.length === 0) setImmediate(flush);
      queue.push(() => {
        call(c, input, requestId).then(resolve, reject);
      });
    });
}
