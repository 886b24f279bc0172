import http from 'node:http';
import https from 'node:https';

// A small in-process HTTP load generator: keep-alive connections on loopback, closed loop (N
// connections, each sends its next request when the last one answered) for throughput, open loop
// (a fixed request rate) for latency at a given load.

export interface Target {
  url: string;
  headers?: Record<string, string>;
  /** https targets: the CA to trust (the edge's local CA); the host name is sent as SNI, the connection goes to 127.0.0.1. */
  ca?: string;
}

/** A keep-alive agent for the target's scheme. */
function agentFor(t: Target, maxSockets: number): http.Agent {
  return t.url.startsWith('https:')
    ? new https.Agent({ keepAlive: true, maxSockets, ...(t.ca ? { ca: t.ca } : {}) })
    : new http.Agent({ keepAlive: true, maxSockets });
}

export interface RunResult {
  /** Raw latencies (ms), for merging slices; dropped from the JSON report. */
  raw?: number[];
  requests: number;
  errors: number;
  non2xx: number;
  seconds: number;
  rps: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
}

function send(agent: http.Agent, u: URL, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const tls = u.protocol === 'https:';
    const opts = {
      agent,
      host: tls ? '127.0.0.1' : u.hostname,
      port: u.port,
      path: u.pathname + u.search,
      method: 'GET',
      headers: tls ? { host: u.host, ...headers } : headers,
    };
    const req = (tls ? https : http).request(tls ? { ...opts, servername: u.hostname } : opts, (res) => {
      res.on('data', () => {});
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : 0);

function summarize(lat: number[], errors: number, non2xx: number, seconds: number): RunResult {
  const sorted = Float64Array.from(lat).sort();
  const arr = Array.from(sorted);
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return {
    raw: lat,
    requests: lat.length,
    errors,
    non2xx,
    seconds: round(seconds),
    rps: Math.round(lat.length / seconds),
    latencyMs: {
      p50: round(pct(arr, 50)),
      p90: round(pct(arr, 90)),
      p99: round(pct(arr, 99)),
      max: round(arr.at(-1) ?? 0),
      mean: round(arr.reduce((a, b) => a + b, 0) / Math.max(1, arr.length)),
    },
  };
}

/** `connections` keep-alive connections, each sending back to back, for durationMs. */
export async function closedLoop(t: Target, connections: number, durationMs: number): Promise<RunResult> {
  const agent = agentFor(t, connections);
  const u = new URL(t.url);
  const lat: number[] = [];
  let errors = 0;
  let non2xx = 0;
  const started = performance.now();
  const end = started + durationMs;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          const status = await send(agent, u, t.headers ?? {});
          if (status < 200 || status >= 300) non2xx++;
          lat.push(performance.now() - t0);
        } catch {
          errors++;
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return summarize(lat, errors, non2xx, seconds);
}

/**
 * A fixed arrival rate (requests/s) for durationMs, on up to maxConnections keep-alive connections.
 * Latency is measured from the moment a request was due (so a stalled server is not hidden by a
 * client that waits for it).
 */
export async function openLoop(t: Target, rate: number, durationMs: number, maxConnections = 256): Promise<RunResult> {
  const agent = agentFor(t, maxConnections);
  const u = new URL(t.url);
  const lat: number[] = [];
  let errors = 0;
  let non2xx = 0;
  let sent = 0;
  const inflight = new Set<Promise<void>>();
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = performance.now();
      const elapsed = now - started;
      const due = Math.min(Math.floor((elapsed / 1000) * rate), Math.floor((durationMs / 1000) * rate));
      while (sent < due) {
        const dueAt = started + (sent / rate) * 1000;
        sent++;
        const p = send(agent, u, t.headers ?? {})
          .then((status) => {
            if (status < 200 || status >= 300) non2xx++;
            lat.push(performance.now() - dueAt);
          })
          .catch(() => void errors++)
          .finally(() => inflight.delete(p));
        inflight.add(p);
      }
      if (elapsed >= durationMs) {
        clearInterval(timer);
        resolve();
      }
    }, 1);
  });
  await Promise.all([...inflight]);
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return summarize(lat, errors, non2xx, seconds);
}

/** Several slices of one target as one result (requests/s over the summed time, merged latencies). */
export function merge(parts: RunResult[]): RunResult {
  const lat = parts.flatMap((p) => p.raw ?? []);
  const seconds = parts.reduce((n, p) => n + p.seconds, 0);
  const r = summarize(
    lat,
    parts.reduce((n, p) => n + p.errors, 0),
    parts.reduce((n, p) => n + p.non2xx, 0),
    seconds,
  );
  return r;
}

/** The result without its raw latencies (for the JSON report). */
export const report = (r: RunResult): Omit<RunResult, 'raw'> => {
  const { raw: _raw, ...rest } = r;
  return rest;
};

/** Rounded to the microsecond, in milliseconds. */
export const r3 = (x: number): number => Math.round(x * 1000) / 1000;

/**
 * Latency `a` adds over `b`, measured in adjacent slices (a[i] ran right after b[i]): the median of the per-pair
 * differences. The machine is shared, and a burst of someone else's work lands in one slice; the median ignores it.
 */
export function pairedAdded(a: RunResult[], b: RunResult[]): { p50: number; p99: number } {
  const median = (xs: number[]) => {
    const s = [...xs].sort((x, y) => x - y);
    return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  const added = (k: 'p50' | 'p99') => r3(median(a.map((x, i) => x.latencyMs[k] - b[i]!.latencyMs[k])));
  return { p50: added('p50'), p99: added('p99') };
}
