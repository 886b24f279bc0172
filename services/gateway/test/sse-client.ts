import { parseSse } from '../../../packages/sdk/src/sse.ts';

/** One server-sent event as a client parses it (comment lines counted apart). */
export interface SseEvent {
  id?: string;
  event: string;
  data: any;
}

/**
 * A minimal EventSource for tests: opens the stream (with Last-Event-ID when given), hands each event to `onEvent`,
 * counts heartbeat comment lines, and can be closed (the connection is dropped, as a client going away does).
 */
export async function openEvents(url: string, token: string, opts: { lastEventId?: string } = {}) {
  const abort = new AbortController();
  const res = await fetch(url, {
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'text/event-stream',
      ...(opts.lastEventId === undefined ? {} : { 'last-event-id': opts.lastEventId }),
    },
    signal: abort.signal,
  });
  const events: SseEvent[] = [];
  let heartbeats = 0;
  const waiters: Array<() => void> = [];
  let ended = false;
  const done = (async () => {
    if (!res.ok || !res.body) return;
    try {
      for await (const m of parseSse(res.body, undefined, () => heartbeats++)) {
        events.push({ ...(m.id === undefined ? {} : { id: m.id }), event: m.event, data: JSON.parse(m.data) });
        waiters.splice(0).forEach((w) => w());
      }
    } catch {
      /* aborted */
    }
    ended = true;
    waiters.splice(0).forEach((w) => w());
  })();
  return {
    status: res.status,
    res,
    events,
    get heartbeats() {
      return heartbeats;
    },
    get ended() {
      return ended;
    },
    /** Resolves once an event matching `pred` has arrived (or the stream ended: then it throws). */
    async until(pred: (e: SseEvent) => boolean, timeoutMs = 60_000): Promise<SseEvent> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const hit = events.find(pred);
        if (hit) return hit;
        if (ended) throw new Error(`stream ended before the event; got ${JSON.stringify(events.map((e) => [e.id, e.event, e.data.status]))}`);
        if (Date.now() > deadline) throw new Error('no such event in time');
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 500);
        });
      }
    },
    close: async () => {
      abort.abort();
      await done;
    },
    done,
  };
}
