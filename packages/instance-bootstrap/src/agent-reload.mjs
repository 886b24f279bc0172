// Tells the running agent to load its keys again. The image names how (AGENTHOST_RELOAD_URL):
//   ws://127.0.0.1:<port>   OpenClaw's gateway: `secrets.reload` over its WebSocket RPC, as a local backend
//                           client (client id gateway-client, mode backend) authenticated with the gateway
//                           token, which OpenClaw grants operator.admin on a loopback connection without
//                           device pairing. OpenClaw re-resolves every SecretRef and swaps its snapshot
//                           atomically; a ref it cannot resolve keeps its last good value and counts a warning.
//   http://127.0.0.1:...    POST; the agent answers {"ok":true} or {"ok":false,"reason"} (the stand-in agent).
// `rewire()` (OpenClaw only) rewrites the config's provider wiring (provider-keys.mjs) and says whether it changed.
// secrets.reload re-resolves the refs of the config OpenClaw already runs, so a changed config must be taken first:
// once connected the reload rewires and, when the file changed, waits for OpenClaw's `config.changed` event (its
// file watcher committed a new config, after a 300 ms debounce), checks with config.get that the revision it runs is
// the one on disk, then reloads. (No config.get before the write: the first one after a start takes seconds.)
// Resolves {applied, reason?}; never throws.

const PROTOCOL = 4;

// A reload that rewires provider settings waits for OpenClaw to take its config file, which just after a start (while
// it loads its plugins) took more than 4 s here: the user who stores a key right after create would be told
// "not applied" for a key OpenClaw takes a moment later. On a loaded machine (load 10–15, several agents on 2 cores)
// 12 s was missed in two CI runs of 29 Nov, a take-up and an unwiring. The gateway waits longer still
// (KEYS_APPLY_WAIT_MS).
const RELOAD_MS = 4000;
const REWIRE_MS = 30000;

export async function reloadAgent({ url, gatewayToken, rewire, timeoutMs = rewire ? REWIRE_MS : RELOAD_MS }) {
  const deadline = Date.now() + timeoutMs;
  let last = 'the agent did not answer';
  // The agent may still be starting (or restarting its listener): try again until the deadline.
  while (Date.now() < deadline) {
    try {
      return url.startsWith('ws') ? await openclawReload(url, gatewayToken, deadline, rewire) : await httpReload(url, deadline);
    } catch (err) {
      last = err?.message ?? String(err);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  return { applied: false, reason: `the agent could not be asked to reload (${last.slice(0, 120)})` };
}

async function httpReload(url, deadline) {
  const res = await fetch(url, { method: 'POST', signal: AbortSignal.timeout(Math.max(200, deadline - Date.now())) });
  const body = await res.json().catch(() => ({}));
  if (res.ok && body?.ok === true) return { applied: true };
  return { applied: false, reason: String(body?.reason ?? `the agent answered HTTP ${res.status}`).slice(0, 200) };
}

/**
 * One short-lived WebSocket: challenge → connect → [rewire → config.changed → config.get: applied] → secrets.reload.
 * Throws when the agent is not reachable.
 */
function openclawReload(url, gatewayToken, deadline, rewire) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    let settled = false;
    let waiting = false;
    let polls = 0;
    const send = (id, method, params = {}) => ws.send(JSON.stringify({ type: 'req', id, method, params }));
    const reload = () => send('reload', 'secrets.reload');
    const finish = (fn, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      try {
        ws.close();
      } catch {
        // already closed
      }
      fn(value);
    };
    const timer = setTimeout(
      () =>
        // An invalid config is never applied: say so rather than retry (the file is already rewritten).
        waiting
          ? finish(resolve, { applied: false, reason: 'the agent did not take the provider settings for its keys in time' })
          : finish(reject, new Error('timed out')),
      Math.max(200, deadline - Date.now()),
    );
    ws.onerror = () => finish(reject, new Error('connection failed'));
    ws.onclose = () => finish(reject, new Error('connection closed'));
    ws.onmessage = (ev) => {
      let m;
      try {
        m = JSON.parse(String(ev.data));
      } catch {
        return;
      }
      if (m.type === 'event' && m.event === 'connect.challenge') {
        ws.send(
          JSON.stringify({
            type: 'req',
            id: 'connect',
            method: 'connect',
            params: {
              minProtocol: PROTOCOL,
              maxProtocol: PROTOCOL,
              client: { id: 'gateway-client', version: '1', platform: 'linux', mode: 'backend' },
              role: 'operator',
              scopes: ['operator.admin'],
              caps: [],
              auth: { token: gatewayToken },
            },
          }),
        );
      } else if (m.type === 'res' && m.id === 'connect') {
        // A gateway still starting its sidecars answers a retryable UNAVAILABLE: ask again.
        if (!m.ok && m.error?.retryable) return finish(reject, new Error('the agent is starting'));
        if (!m.ok) return finish(resolve, { applied: false, reason: `the agent refused the connection (${m.error?.code ?? 'error'})` });
        if (!rewire?.().changed) return reload();
        waiting = true;
      } else if (m.type === 'event' && m.event === 'config.changed' && waiting) {
        send(`config-${++polls}`, 'config.get');
      } else if (m.type === 'res' && typeof m.id === 'string' && m.id.startsWith('config-')) {
        // The revision OpenClaw runs is the file's: take the keys. Else the next config.changed asks again.
        const applied = m.payload?.appliedConfigHash ?? null;
        if (!m.ok || (applied && applied === m.payload?.configRevisionHash)) return reload();
      } else if (m.type === 'res' && m.id === 'reload') {
        if (!m.ok) return finish(resolve, { applied: false, reason: `secrets.reload failed (${m.error?.code ?? 'error'}); the agent keeps its previous keys` });
        const warnings = Number(m.payload?.warningCount ?? 0);
        if (warnings > 0) {
          return finish(resolve, { applied: false, reason: `the agent could not resolve ${warnings} of its secrets and keeps their previous values` });
        }
        finish(resolve, { applied: true });
      }
    };
  });
}
