import type { Response } from 'express';

// The one writer of server-sent events: frames are made here and written with `write` (or, for the timers' comment
// lines, `heartbeat`), which respect the socket's backpressure. Clients parse them with the sdk's parseSse.

/** One server-sent event whose data is already JSON text (a stored webhook body); no id line when `id` is undefined. */
export const jsonFrame = (id: number | string | undefined, event: string, json: string) =>
  `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${json}\n\n`;

/** One server-sent event. */
export const frame = (id: number | string | undefined, event: string, data: unknown) => jsonFrame(id, event, JSON.stringify(data));

/** An id without data: tells the client how far the stream was read, so that its resume starts there. */
export const idFrame = (id: number | string) => `id: ${id}\n\n`;

/**
 * A comment line every `seconds` (proxies close an idle stream) and `tick` after it. Skipped while the socket has
 * not taken what was written before: the client is reading slowly, and a comment would only add to what waits.
 */
export function heartbeat(res: Response, seconds: number, text = 'heartbeat', tick?: () => void): NodeJS.Timeout {
  return setInterval(() => {
    if (!res.writableNeedDrain && !res.writableEnded && !res.destroyed) res.write(`: ${text}\n\n`);
    tick?.();
  }, seconds * 1000);
}

/** The headers of an event stream (no proxy buffering: a reverse proxy would hold the events back). */
export function openStream(res: Response): void {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
  res.flushHeaders();
}

/** Writes one frame and waits for the socket to take it (false when the client went away). */
export async function write(res: Response, text: string): Promise<boolean> {
  if (res.destroyed || res.writableEnded) return false;
  if (res.write(text)) return true;
  return new Promise<boolean>((resolve) => {
    const done = (ok: boolean) => () => {
      res.off('drain', drained);
      res.off('close', closed);
      resolve(ok);
    };
    const drained = done(true);
    const closed = done(false);
    res.once('drain', drained);
    res.once('close', closed);
  });
}

/**
 * What a stream's reading loop sleeps on between reads: a signal (an event named the instance, the client went
 * away) ends the sleep at once, and one that comes while the loop is reading is remembered (`woken`), so the loop
 * reads again instead of sleeping through it.
 */
export class Waker {
  woken = false;
  private wake: (() => void) | undefined;

  readonly signal = (): void => {
    this.woken = true;
    this.wake?.();
  };

  /** Before a read: signals from here on count. */
  reset(): void {
    this.woken = false;
  }

  /** Sleeps until a signal, or `ms` (forever when omitted); returns at once when one came since the reset. */
  async sleep(ms?: number): Promise<void> {
    if (!this.woken) {
      await new Promise<void>((resolve) => {
        const timer = ms === undefined ? undefined : setTimeout(resolve, ms);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.wake = undefined;
  }
}

/** A quiet stream reads the bus again this often even with no wake (the wake is a hint, the stream the truth). */
const QUIET_REREAD_MS = 3000;

/**
 * The events after `from`, one read in flight, for as long as `isOpen()`. The wake is the event's core-NATS delivery,
 * which can come before the stream has stored the event: a read after a wake that finds nothing is tried again every
 * 50 ms for a second, and a quiet stream is read again every few seconds whatever happens, so no event waits for the
 * next one to be seen. The caller skips what is not its own.
 */
export async function* follow<E extends { seq: number }>(
  read: (from: number) => Promise<E | undefined>,
  waker: Waker,
  from: number,
  isOpen: () => boolean,
): AsyncGenerator<E> {
  let cursor = from;
  let soon = 0;
  while (isOpen()) {
    waker.reset();
    const ev = await read(cursor + 1);
    if (!ev) {
      if (isOpen()) await waker.sleep(soon > 0 ? 50 : QUIET_REREAD_MS);
      soon = waker.woken ? 20 : Math.max(0, soon - 1);
      continue;
    }
    soon = 0;
    cursor = ev.seq;
    yield ev;
  }
}

/**
 * An event stream's open state from its headers to its end: open until the client goes away or `end()` (the stream's
 * lifetime, or the gateway shutting down through `hold`), each of which wakes the reading loop; a heartbeat comment
 * meanwhile keeps proxies from closing an idle stream. `close()`, after the loop, stops both and ends the answer.
 */
export function liveStream(res: Response, waker: Waker, hold: (end: () => void) => () => void, heartbeatSeconds: number) {
  // A client gone while the stream was being set up has closed already: no close event will come.
  let open = !(res.closed || res.destroyed);
  const stop = () => {
    open = false;
    waker.signal();
  };
  const end = () => {
    stop();
    if (!res.writableEnded) res.end();
  };
  res.once('close', stop);
  const forget = hold(end);
  const beat = heartbeat(res, heartbeatSeconds);
  return {
    isOpen: () => open,
    end,
    close: () => {
      clearInterval(beat);
      forget();
      if (!res.writableEnded) res.end();
    },
  };
}
