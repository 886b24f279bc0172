// Fetching the instance's sealed keys from the gateway, with retries: the first thing bootstrap.mjs does.
// Zero dependencies (node: built-ins only), like every file of the bootstrap (deploy/images/build.sh copies them all).

export const DEFAULT_TIMEOUT_MS = 60_000;
const MAX_ATTEMPT_MS = 15_000;
const MAX_BACKOFF_MS = 5_000;
const MAX_BODY_BYTES = 8 * 1024 * 1024;

export class FatalError extends Error {
  constructor(message, fields = {}) {
    super(message);
    this.name = 'FatalError';
    this.fields = fields;
  }
}

function safeUrlForLog(url) {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return '<invalid url>';
  }
}

function isRetryableStatus(status) {
  return status === 408 || status === 425 || status === 429 || status >= 500;
}

function parseRetryAfterMs(value) {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

const defaultSleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * GETs the keys map. Retries network errors, 408/425/429 and 5xx with capped exponential
 * backoff until timeoutMs has passed; 401/403/404 and other 4xx fail at once.
 * @returns {Promise<Record<string, unknown>>} key name -> sealed value
 */
export async function fetchKeys({
  url,
  instanceId,
  instanceSecret,
  timeoutMs = DEFAULT_TIMEOUT_MS,
  log = () => {},
  fetchImpl = globalThis.fetch,
  sleep = defaultSleep,
  now = Date.now,
}) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw new FatalError('AGENTHOST_KEYS_URL is not a valid URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new FatalError('AGENTHOST_KEYS_URL must be http(s)');
  }
  const where = safeUrlForLog(url);
  const deadline = now() + timeoutMs;
  let backoff = 250;
  let lastError = '';
  for (let attempt = 1; ; attempt++) {
    const remaining = deadline - now();
    let res;
    try {
      res = await fetchImpl(url, {
        method: 'GET',
        headers: {
          accept: 'application/json',
          'user-agent': 'agenthost-bootstrap/1',
          'x-instance-id': instanceId,
          'x-instance-secret': instanceSecret,
        },
        // Never follow a redirect: it would re-send the instance secret elsewhere.
        redirect: 'manual',
        signal: AbortSignal.timeout(Math.max(1000, Math.min(MAX_ATTEMPT_MS, remaining))),
      });
    } catch (err) {
      lastError = `network error (${describeNetworkError(err)})`;
    }
    let retryAfterMs;
    if (res) {
      const status = res.status;
      if (status >= 200 && status < 300) {
        const body = await readBody(res);
        let json;
        try {
          json = JSON.parse(body);
        } catch {
          throw new FatalError('keys endpoint returned a body that is not JSON', { status });
        }
        const keys = json?.keys;
        if (keys === null || typeof keys !== 'object' || Array.isArray(keys)) {
          throw new FatalError('keys endpoint response has no "keys" object', { status });
        }
        log('info', 'keys fetched', { url: where, attempts: attempt, count: Object.keys(keys).length });
        return keys;
      }
      await res.arrayBuffer().catch(() => {});
      if (status === 401 || status === 403) {
        throw new FatalError(`keys endpoint rejected the instance credentials (HTTP ${status}); check AGENTHOST_INSTANCE_ID / AGENTHOST_INSTANCE_SECRET`, {
          status,
          url: where,
        });
      }
      if (status === 404) {
        throw new FatalError('keys endpoint answered 404: the instance is unknown or AGENTHOST_KEYS_URL is wrong', { status, url: where });
      }
      if (status >= 300 && status < 400) {
        throw new FatalError(`keys endpoint answered a redirect (HTTP ${status}); not followed`, {
          status,
          url: where,
        });
      }
      if (!isRetryableStatus(status)) {
        throw new FatalError(`keys endpoint answered HTTP ${status}`, { status, url: where });
      }
      lastError = `HTTP ${status}`;
      retryAfterMs = parseRetryAfterMs(res.headers.get('retry-after'));
    }
    const jitter = Math.floor(Math.random() * (backoff / 4));
    let wait = Math.min(MAX_BACKOFF_MS, backoff) + jitter;
    if (retryAfterMs !== undefined) wait = Math.max(wait, Math.min(retryAfterMs, 10_000));
    if (now() + wait >= deadline) {
      throw new FatalError(`could not fetch keys within ${timeoutMs} ms (${attempt} attempts, last: ${lastError})`, { url: where, attempts: attempt });
    }
    log('warn', 'keys fetch failed, retrying', { url: where, attempt, error: lastError, retry_in_ms: wait });
    await sleep(wait);
    backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
  }
}

function describeNetworkError(err) {
  if (err?.name === 'TimeoutError' || err?.name === 'AbortError') return 'timeout';
  const cause = err?.cause;
  const text = cause?.code ?? err?.code ?? cause?.message ?? err?.message ?? err?.name ?? 'error';
  return String(text).slice(0, 120);
}

async function readBody(res) {
  const buf = Buffer.from(await res.arrayBuffer());
  if (buf.length > MAX_BODY_BYTES) throw new FatalError('keys endpoint response too large');
  return buf.toString('utf8');
}
