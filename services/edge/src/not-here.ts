import { createHash } from 'node:crypto';
import type http from 'node:http';
import { ERROR_CODES } from '@agenthost/shared';

/**
 * What anyone but its owner gets for an instance that is not running, and for an id that is no instance: the same
 * answer, so a stranger learns nothing of the id, and nothing is woken (owner.ts says who the owner is).
 */
export const NOT_HERE_MESSAGE = 'No agent answers here. Its owner opens it with its access token, which wakes it when it sleeps';

/**
 * A browser opening the address gets a page instead: the dashboard opens an instance at <url>/#token=<access token>, and
 * the fragment never reaches a server, so the page's script sends the token once (as the Control UI does on its own
 * calls): the owner's request wakes the instance and gets the edge's session cookie, then the page loads again, now
 * the agent's. Without a token, or with a wrong one, the page stays as it is.
 */
const SCRIPT = `(async () => {
  const say = (text) => { document.getElementById('m').textContent = text; };
  const token = new URLSearchParams(location.hash.slice(1)).get('token');
  if (!token) return;
  // Once only: a page that comes back right after it woke the agent would otherwise load again and again.
  const last = Number(sessionStorage.getItem('agenthost-woke') || 0);
  if (Date.now() - last < 30000) return say('The agent woke but did not stay reachable; reload the page to try again.');
  say('Waking the agent\\u2026');
  for (let i = 0; i < 20; i++) {
    const r = await fetch(location.pathname + location.search, { headers: { authorization: 'Bearer ' + token }, cache: 'no-store' }).catch(() => null);
    const body = r && (r.headers.get('content-type') || '').includes('application/json') ? await r.json().catch(() => ({})) : {};
    // The edge's answers that pass (waking, the agent unreachable for a moment, the platform busy) say when to ask
    // again; those that do not (stopped, failed, not this token's) are said and end the page's work.
    const again = !r ? 3 : typeof body.code === 'string' ? Number(r.headers.get('retry-after')) : 0;
    if (again > 0) {
      await new Promise((done) => setTimeout(done, Math.min(5, Math.max(1, again)) * 1000));
      continue;
    }
    if (typeof body.code === 'string' && body.code.startsWith('INSTANCE_')) return say(body.error);
    sessionStorage.setItem('agenthost-woke', String(Date.now()));
    return location.reload();
  }
  say('The agent did not wake up in time; reload the page to try again.');
})();`;

const PAGE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Agent</title></head><body style="font-family:system-ui,sans-serif;margin:3rem auto;max-width:36rem;padding:0 1rem">
<p id="m">${NOT_HERE_MESSAGE}.</p><script>${SCRIPT}</script></body></html>`;

/** The page runs only its own script, talks only to its own host, and is framed by no one. */
const CSP = `default-src 'none'; script-src 'sha256-${createHash('sha256').update(SCRIPT).digest('base64')}'; connect-src 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;

export function notHere(req: http.IncomingMessage, res: http.ServerResponse): void {
  const { status } = ERROR_CODES.INSTANCE_NOT_FOUND;
  const page = (req.headers.accept ?? '').includes('text/html');
  const body = page ? PAGE : JSON.stringify({ error: NOT_HERE_MESSAGE, code: 'INSTANCE_NOT_FOUND', status });
  res.writeHead(status, {
    'content-type': page ? 'text/html; charset=utf-8' : 'application/json',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(body),
    ...(page ? { 'content-security-policy': CSP, 'referrer-policy': 'no-referrer' } : {}),
  });
  res.end(body);
}
