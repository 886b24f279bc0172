// Key hot reload, the bootstrap's side. While the agent runs, the bootstrap keeps a watch open on the gateway
// (GET /keys/watch with the instance credentials, server-sent events). Each `keys` event carries the instance's
// sealed keys: when the watch opens (so a reconnect catches up on anything missed) and at every change. The
// bootstrap opens them in memory, serves them to the agent's resolver (key-server.mjs), asks the agent to
// reload (agent-reload.mjs) and reports the result of a change on POST /keys/applied, quoting its change_id.
import { reloadAgent } from './agent-reload.mjs';

const MAX_BACKOFF_MS = 30_000;
const MAX_EVENT_BYTES = 8 * 1024 * 1024;

/** Same names and values (order aside). */
function sameKeys(a, b) {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

/** Parses a server-sent event stream: calls onEvent(name, data) for each complete event. */
async function readEvents(body, onEvent) {
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true });
    if (buf.length > MAX_EVENT_BYTES) throw new Error('event too large');
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) name = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
      }
      if (data.length) await onEvent(name, data.join('\n'));
    }
  }
}

/**
 * Runs until `signal` aborts. `state.keys` is the map the key server serves; `open(sealed)` decrypts a sealed
 * map into {env, skipped}; `wire(names)` (OpenClaw) rewires standard provider keys for the new names, inside the
 * reload (agent-reload.mjs). Never throws: a lost watch is opened again with backoff.
 */
export async function watchKeys({
  watchUrl,
  appliedUrl,
  reloadUrl,
  gatewayToken,
  instanceId,
  instanceSecret,
  state,
  open,
  wire,
  log,
  signal,
  reload = reloadAgent,
}) {
  let backoff = 500;
  while (!signal.aborted) {
    try {
      const res = await fetch(watchUrl, {
        headers: { accept: 'text/event-stream', 'x-instance-id': instanceId, 'x-instance-secret': instanceSecret, 'user-agent': 'agenthost-bootstrap/1' },
        redirect: 'manual',
        signal,
      });
      if (res.status !== 200 || !res.body) {
        await res.arrayBuffer().catch(() => {});
        // Refused credentials stay refused until the instance restarts: ask again, but rarely.
        if (res.status === 401 || res.status === 403 || res.status === 404) backoff = MAX_BACKOFF_MS;
        throw new Error(`watch answered HTTP ${res.status}`);
      }
      log('info', 'key watch open');
      backoff = 500;
      await readEvents(res.body, async (name, data) => {
        if (name !== 'keys') return;
        const event = JSON.parse(data);
        const rewire = wire ? { rewire: () => wire(Object.keys(state.keys)) } : {};
        const result = await applyKeys({ event, state, open, reload: () => reload({ url: reloadUrl, gatewayToken, ...rewire }), log });
        if (event.change_id) await report({ appliedUrl, instanceId, changeId: event.change_id, result, log });
      });
      throw new Error('watch closed');
    } catch (err) {
      if (signal.aborted) return;
      const wait = Math.min(MAX_BACKOFF_MS, backoff) + Math.floor(Math.random() * 250);
      log('warn', 'key watch lost, reopening', { error: String(err?.cause?.code ?? err?.message ?? err).slice(0, 120), retry_in_ms: wait });
      await new Promise((r) => setTimeout(r, wait));
      backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
    }
  }
}

/** Opens the sealed keys of one event and reloads the agent when they differ from what it has. */
async function applyKeys({ event, state, open, reload, log }) {
  let opened;
  try {
    opened = open(event.keys ?? {});
  } catch {
    return { applied: false, reason: 'the keys could not be opened; restart the instance' };
  }
  if (sameKeys(opened.env, state.keys)) return { applied: true };
  state.keys = opened.env;
  const started = Date.now();
  const result = await reload();
  log(result.applied ? 'info' : 'warn', result.applied ? 'agent reloaded its keys' : 'agent did not reload its keys', {
    keys: Object.keys(opened.env).length,
    ms: Date.now() - started,
    ...(result.applied ? {} : { reason: result.reason }),
  });
  if (result.applied && opened.skipped.length) {
    return {
      applied: false,
      reason: `${opened.skipped.length} key(s) could not be opened: ${opened.skipped
        .map((s) => s.name)
        .join(', ')
        .slice(0, 200)}`,
    };
  }
  return result;
}

async function report({ appliedUrl, instanceId, changeId, result, log }) {
  try {
    const res = await fetch(appliedUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'agenthost-bootstrap/1' },
      body: JSON.stringify({
        instance_id: instanceId,
        change_id: changeId,
        applied: result.applied,
        ...(result.reason ? { reason: result.reason.slice(0, 300) } : {}),
      }),
      redirect: 'manual',
      signal: AbortSignal.timeout(5000),
    });
    await res.arrayBuffer().catch(() => {});
  } catch (err) {
    log('warn', 'could not report the reload result', { error: String(err?.cause?.code ?? err?.message ?? err).slice(0, 120) });
  }
}

/** /api/keys/retrieve → /api/keys/<leaf>: the watch and the report live beside the retrieve endpoint. */
export function siblingUrl(keysUrl, leaf) {
  const u = new URL(keysUrl);
  u.pathname = u.pathname.replace(/\/retrieve\/?$/, `/${leaf}`);
  return u.toString();
}
