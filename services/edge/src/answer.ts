import { chmodSync, rmSync } from 'node:fs';
import http from 'node:http';
import { type contracts, ERROR_CODES } from '@agenthost/shared';
import type { Activity } from './activity.ts';
import type { RouteKeeper } from './keeper.ts';
import { notHere } from './not-here.ts';
import { ownerOf, SESSION_HEADER, sessionCookie } from './owner.ts';

type Route = contracts.provisioner.Route;

type Code = keyof typeof ERROR_CODES;

/** Answered with the keeper's verdict: 204 + this header = proxy there; anything else goes to the client as is. */
export const UPSTREAM_HEADER = 'x-agenthost-upstream';

/** Caddy tells the keeper the client's address and port in this header (never the client's own). */
export const CLIENT_HEADER = 'x-agenthost-client';

/** What Caddy asks after it could not connect to the agent the keeper named (caddy-config.ts, errorRoutes). */
export const STALE_ROUTE_PATH = '/route/stale';

/**
 * What Caddy asks for every request to an instance host (its Host header is the client's): 204 with the agent's
 * address when the instance runs, otherwise the answer the client gets, in the API's error shape. Only the owner's
 * requests (owner.ts) wake an instance, count as its traffic and learn its state. Listens on a unix socket that only
 * Caddy's user reaches; Caddy passes the client's credentials (to tell the owner) but never its body, and the keeper
 * never logs them.
 */
export function answerServer(keeper: RouteKeeper, domain: string, opts: { activity?: Activity; wakeTimeoutMs?: number } = {}): http.Server {
  const suffix = `.${domain}`;
  return http.createServer(async (req, res) => {
    if (req.url?.startsWith('/ask?')) {
      // ACME on demand: a certificate only for the domain itself and for instances that exist.
      const asked = (new URL(req.url, 'http://keeper').searchParams.get('domain') ?? '').toLowerCase();
      const known = asked === domain || (asked.endsWith(suffix) && keeper.get(asked.slice(0, -suffix.length)) !== undefined);
      res.writeHead(known ? 200 : 404).end();
      return;
    }
    const host = (req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
    const id = host.endsWith(suffix) ? host.slice(0, -suffix.length) : '';
    if (!keeper.ready) return error(res, 'SERVICE_UNAVAILABLE', { message: 'The edge is starting; retry shortly', retryAfter: 1 });
    let route = keeper.get(id);
    if (route && req.url === STALE_ROUTE_PATH) {
      // The agent named before did not take the connection (nothing was sent to it): the route may be older than the
      // instance's state, say a container just stopped for sleep whose event is on its way. Read it again; the same
      // running address again means the agent itself does not answer.
      const tried = route.upstream;
      await keeper.refresh(id);
      route = keeper.get(id);
      if (route?.status === 'running' && route.upstream === tried) return error(res, 'INSTANCE_UNREACHABLE', { retryAfter: 2 });
    }
    const owner = route && ownerOf(route, req.headers);
    if (!route || !owner) {
      // Anyone's request reaches a running agent (which checks its own credentials: a webhook, say), but neither
      // wakes an instance nor counts as its traffic, and gets one answer for every instance that does not run.
      if (route?.status === 'running') return proxy(res, route);
      return notHere(req, res);
    }
    opts.activity?.touch(id, clientOf(req));
    if (route.status === 'sleeping') {
      // Held while the instance wakes (Caddy waits for this answer), then proxied like any other request.
      const woken = await keeper.awaken(id, opts.wakeTimeoutMs ?? 60_000).catch(() => 'failed' as const);
      if (woken === 'failed') return error(res, 'SERVICE_UNAVAILABLE', { message: 'The instance could not be woken now; retry shortly', retryAfter: 5 });
      if (woken === null) return error(res, 'INSTANCE_NOT_FOUND');
      if (!woken) return error(res, 'INSTANCE_STARTING', { message: 'The instance is waking up; retry shortly', retryAfter: 5 });
      route = woken;
    }
    switch (route.status) {
      case 'running':
        // A request with the token starts (or renews) the browser's session, which its token-less requests carry.
        return proxy(res, route, owner === 'token' ? sessionCookie(route) : undefined);
      case 'provisioning':
        return error(res, 'INSTANCE_STARTING', { retryAfter: 2 });
      case 'stopped':
        return error(res, 'INSTANCE_STOPPED');
      default:
        return error(res, 'INSTANCE_FAILED');
    }
  });
}

function proxy(res: http.ServerResponse, route: Route, session?: string): void {
  res.writeHead(204, { [UPSTREAM_HEADER]: route.upstream, ...(session ? { [SESSION_HEADER]: session } : {}) });
  res.end();
}

/** The address the client connected from, as Caddy gives it (caddy-config.ts): activity.ts follows that connection. */
const clientOf = (req: http.IncomingMessage): string | undefined => {
  const v = req.headers[CLIENT_HEADER];
  return typeof v === 'string' && v !== '' ? v : undefined;
};

export async function listenOnSocket(server: http.Server, path: string): Promise<void> {
  rmSync(path, { force: true }); // a socket left by a process that died
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  chmodSync(path, 0o660);
}

/** An answer of the edge's own, in the API's error shape, with Retry-After when it passes. */
export function error(res: http.ServerResponse, code: Code, opts: { message?: string; retryAfter?: number } = {}): void {
  const { status, message } = ERROR_CODES[code];
  const body = JSON.stringify({ error: opts.message ?? message, code, status });
  res.writeHead(status, {
    'content-type': 'application/json',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(body),
    ...(opts.retryAfter ? { 'retry-after': String(opts.retryAfter) } : {}),
  });
  res.end(body);
}
