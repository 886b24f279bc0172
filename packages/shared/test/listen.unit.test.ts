import type { Msg, NatsConnection, SubscriptionOptions } from 'nats';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { encode, listen, type Logger } from '../src/index.ts';

// A connection that hands each published body to the one subscription's callback, and a logger that keeps its
// warnings: enough to see what listen() does with a message, without a NATS server.
function fakeBus() {
  let callback: SubscriptionOptions['callback'];
  let unsubscribed = false;
  const nc = {
    subscribe: (_subject: string, opts: SubscriptionOptions) => {
      callback = opts.callback;
      return { unsubscribe: () => void (unsubscribed = true) };
    },
  } as unknown as NatsConnection;
  const warnings: string[] = [];
  const log = { warn: (_o: unknown, msg: string) => void warnings.push(msg) } as unknown as Logger;
  const send = (body: unknown) =>
    callback?.(null, { subject: 'test.subject', data: typeof body === 'string' ? new TextEncoder().encode(body) : encode(body) } as Msg);
  return { nc, log, warnings, send, unsubscribed: () => unsubscribed };
}

const on = { subject: 'test.subject', payload: z.object({ id: z.string() }) };

describe('listen', () => {
  it('hands the parsed payload to the handler', () => {
    const bus = fakeBus();
    const got: string[] = [];
    listen(bus.nc, on, (p) => void got.push(p.id), bus.log);
    bus.send({ id: 'a', extra: 1 });
    expect(got).toEqual(['a']);
    expect(bus.warnings).toEqual([]);
  });

  it('logs and drops a message that breaks the contract or is not JSON, and keeps listening', () => {
    const bus = fakeBus();
    const got: string[] = [];
    listen(bus.nc, on, (p) => void got.push(p.id), bus.log);
    bus.send({ id: 7 });
    bus.send('not json');
    bus.send({ id: 'b' });
    expect(got).toEqual(['b']);
    expect(bus.warnings).toEqual(['dropping a message that breaks its contract', 'dropping a message that breaks its contract']);
  });

  it('logs a handler that throws or rejects, and the next message is still handled', async () => {
    const bus = fakeBus();
    const got: string[] = [];
    listen(
      bus.nc,
      on,
      async (p) => {
        if (p.id === 'boom') throw new Error('boom');
        got.push(p.id);
      },
      bus.log,
    );
    bus.send({ id: 'boom' });
    bus.send({ id: 'c' });
    await sleep(0);
    expect(got).toEqual(['c']);
    expect(bus.warnings).toEqual(['listener failed on a message']);
  });

  it('ends with unsubscribe()', () => {
    const bus = fakeBus();
    listen(bus.nc, on, () => {}, bus.log).unsubscribe();
    expect(bus.unsubscribed()).toBe(true);
  });
});
