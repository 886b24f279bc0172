import createClient, { type Client } from 'openapi-fetch';
import { AgenthostError, unwrap } from './errors.ts';
import { needsNodeFetch, nodeFetch } from './localhost.ts';
import type { components, paths } from './schema.ts';
import { parseSse, type SseMessage } from './sse.ts';

type Schemas = components['schemas'];
export type InstanceState = 'running' | 'stopped' | 'sleeping' | 'deleted';
export type WaitResult = Schemas['WaitForInstanceResponse'];
/** A lifecycle event: `current` (the status when a stream opens), `status` (a change) or `deleted` (the last). */
export interface InstanceEvent {
  id?: string;
  event: 'current' | 'status' | 'deleted';
  data: Schemas['StreamInstanceEventsResponse'];
}
/** A line of the agent's output; `id` (follow only) is where a resume continues. */
export interface LogLine {
  id?: string;
  text: string;
}

export interface AgenthostOptions {
  /** The API's base URL, with /api (e.g. http://127.0.0.1:8080/api, or /api in the dashboard). */
  baseUrl: string;
  /** The session token, or a function read at each request (a session that changes). */
  token?: string | (() => string | undefined);
  fetch?: (request: Request) => Promise<Response>;
  /**
   * Node only: the CA certificate (PEM) to trust for the API instead of the usual roots, e.g. the local edge's
   * (/var/lib/agenthost/edge/data/pki/authorities/local/root.crt). NODE_EXTRA_CA_CERTS adds one to the roots instead.
   */
  ca?: string;
  /** Pause before a dropped stream is resumed (default 1000 ms). */
  retryMs?: number;
}

export interface StreamOptions {
  /** Resume after this event id (from a previous stream). */
  lastEventId?: string;
  signal?: AbortSignal;
}

/** Answers to a resumed stream that say to come back: the stream goes on after the wait. */
const RETRYABLE = new Set([429, 502, 503, 504]);

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/**
 * The typed client: `api` is openapi-fetch over the generated `paths` (every operation, typed bodies and answers),
 * plus helpers for what takes more than one call: waiting for a state, and the event and log streams as async
 * iterators that resume by Last-Event-ID after a dropped connection.
 */
export function createAgenthost(o: AgenthostOptions) {
  // In Node, `https://agenthost.localhost` needs a fetch that resolves .localhost itself (localhost.ts); made once, on
  // the first call. A browser resolves it, and o.fetch is the caller's.
  let made: Promise<(request: Request) => Promise<Response>> | undefined;
  const fetch = o.fetch ?? (needsNodeFetch(o.baseUrl, o.ca) ? async (request: Request) => (await (made ??= nodeFetch(o.ca)))(request) : undefined);
  const api: Client<paths> = createClient<paths>({ baseUrl: o.baseUrl, ...(fetch ? { fetch } : {}) });
  api.use({
    onRequest({ request }) {
      const token = typeof o.token === 'function' ? o.token() : o.token;
      if (token && !request.headers.has('authorization')) request.headers.set('authorization', `Bearer ${token}`);
      return request;
    },
  });
  const retryMs = o.retryMs ?? 1000;

  /**
   * Reads an event stream, reconnecting with the last id after a drop until `last` says the stream is over or the
   * signal aborts. A refusal on the first connection is thrown; on a resume, 404 means the instance is gone: the end,
   * and an answer that says to retry (429, 502, 503, 504: a busy or restarting platform) is retried after its
   * Retry-After, as a dropped connection is, instead of ending a stream the caller is still reading.
   */
  async function* resumable(
    open: (lastEventId: string | undefined) => Promise<{ data?: ReadableStream<Uint8Array> | null; error?: unknown; response: Response }>,
    opts: StreamOptions,
    last: (m: SseMessage) => boolean,
  ): AsyncGenerator<SseMessage> {
    let lastId = opts.lastEventId;
    let resumed = false;
    while (!opts.signal?.aborted) {
      let r: Awaited<ReturnType<typeof open>> | undefined;
      try {
        r = await open(lastId);
      } catch (err) {
        if (opts.signal?.aborted) return;
        if (!resumed) throw err;
      }
      let wait = retryMs;
      if (r && !r.response.ok) {
        if (resumed && r.response.status === 404) return;
        if (!resumed || !RETRYABLE.has(r.response.status)) throw new AgenthostError(r.response.status, r.error);
        // A refusal has no stream (openapi-fetch reads its body as the error): wait, and open again.
        wait = Math.max(retryMs, 1000 * (Number(r.response.headers.get('retry-after')) || 0));
      }
      if (r?.data) {
        try {
          for await (const m of parseSse(r.data, opts.signal)) {
            if (m.id !== undefined) lastId = m.id;
            yield m;
            if (last(m)) return;
          }
        } catch {
          /* the connection dropped: resume below */
        }
      }
      resumed = true;
      await sleep(wait, opts.signal);
    }
  }

  return {
    api,

    /** Resolves when the instance reaches `state` (GET /instance/wait, asked again until `timeoutSeconds`). */
    async waitFor(instanceId: string, state: InstanceState, opts: { timeoutSeconds?: number; signal?: AbortSignal } = {}): Promise<WaitResult> {
      const deadline = Date.now() + (opts.timeoutSeconds ?? 300) * 1000;
      for (;;) {
        const timeout = Math.min(60, Math.max(1, Math.ceil((deadline - Date.now()) / 1000)));
        const r = await api.GET('/instance/wait/{instanceId}', {
          params: { path: { instanceId }, query: { state, timeout } },
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
        if (r.response.ok) return r.data!;
        const err = new AgenthostError(r.response.status, r.error);
        if (err.code !== 'WAIT_TIMEOUT' || Date.now() >= deadline) throw err;
      }
    },

    /** The instance's lifecycle events (GET /instance/events), resumed after drops; ends after `deleted`. */
    async *events(instanceId: string, opts: StreamOptions = {}): AsyncGenerator<InstanceEvent> {
      const open = (lastEventId: string | undefined) =>
        api.GET('/instance/events/{instanceId}', {
          params: { path: { instanceId }, ...(lastEventId ? { header: { 'Last-Event-ID': lastEventId } } : {}) },
          parseAs: 'stream',
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
      for await (const m of resumable(open, opts, (m) => m.event === 'deleted')) {
        yield { ...(m.id === undefined ? {} : { id: m.id }), event: m.event as InstanceEvent['event'], data: JSON.parse(m.data) as InstanceEvent['data'] };
      }
    },

    /**
     * Every event of the caller's as webhooks deliver them (GET /webhooks/events): `ready` first on a new stream, then
     * each event, its `data` the exact body a delivery carries (kept as text, for signing); resumed after drops until
     * the signal aborts.
     */
    webhookEvents(opts: StreamOptions = {}): AsyncGenerator<SseMessage> {
      const open = (lastEventId: string | undefined) =>
        api.GET('/webhooks/events', {
          params: lastEventId ? { header: { 'Last-Event-ID': lastEventId } } : {},
          parseAs: 'stream',
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
      return resumable(open, opts, () => false);
    },

    /**
     * The agent's output: the last `tail` lines, or with `follow` each line as it is written (GET /instance/logs with
     * follow=true), resumed after drops, until the instance is deleted or the signal aborts.
     */
    async *logs(instanceId: string, opts: StreamOptions & { follow?: boolean; tail?: number; since?: string } = {}): AsyncGenerator<LogLine> {
      const query = { ...(opts.tail === undefined ? {} : { tail: opts.tail }), ...(opts.since === undefined ? {} : { since: opts.since }) };
      if (!opts.follow) {
        // The operation answers JSON or, with follow, events: without follow it is the JSON.
        const page = unwrap(await api.GET('/instance/logs/{instanceId}', { params: { path: { instanceId }, query } })) as Schemas['GetInstanceLogsResponse'];
        for (const text of page.lines) yield { text };
        return;
      }
      const open = (lastEventId: string | undefined) =>
        api.GET('/instance/logs/{instanceId}', {
          params: { path: { instanceId }, query: { ...query, follow: 'true' }, ...(lastEventId ? { header: { 'Last-Event-ID': lastEventId } } : {}) },
          parseAs: 'stream',
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
      for await (const m of resumable(open, opts, () => false)) {
        if (m.event === 'line') yield { ...(m.id === undefined ? {} : { id: m.id }), text: (JSON.parse(m.data) as { text: string }).text };
      }
    },
  };
}

export type Agenthost = ReturnType<typeof createAgenthost>;
