import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { type contracts, hashToken } from '@agenthost/shared';

type Route = contracts.provisioner.Route;

/**
 * How the edge tells an instance's owner from anyone else who knows its id: only the owner's requests wake the instance
 * and count as its traffic (docs/decisions/0048-only-its-owner-wakes-an-instance.md). Two proofs:
 * - its access token as `Authorization: Bearer` (what OpenClaw's Control UI sends on its HTTP calls, and API clients),
 *   checked against the SHA-256 the provisioner keeps (route.token_sha256), in constant time;
 * - the edge's session cookie, set on the answer to a request with the token, so the requests that carry no token
 *   (the page itself, its assets, its WebSocket: the UI sends the token inside the socket) count too.
 * The cookie is signed with the token's hash: every edge has it from the route table, and a new token (a restart
 * mints one) ends the sessions of the old one. It proves only "the owner's browser" to the edge; the agent still
 * checks the token itself.
 */
export const SESSION_COOKIE = '__Host-agenthost-session';
/**
 * The keeper's answer to Caddy carries the cookie to set in this header (caddy-config.ts adds it as Set-Cookie). Spelt
 * as Caddy's placeholder {http.reverse_proxy.header.<name>} names it: the canonical form, matched exactly.
 */
export const SESSION_HEADER = 'X-Agenthost-Session';
/** A session lasts this long after the last request that carried the token (the Control UI sends it at every load). */
export const SESSION_SECONDS = 12 * 3600;

export type Owner = 'token' | 'session';

const same = (a: string, b: string): boolean => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

const signature = (route: Route, expires: number): string =>
  createHmac('sha256', route.token_sha256).update(`${route.instance_id}.${expires}`).digest('base64url');

/** Whose request this is: the owner's by its token or by a session of this instance, or undefined (anyone's). */
export function ownerOf(route: Route, headers: IncomingHttpHeaders, now = Date.now()): Owner | undefined {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? '')?.[1];
  if (bearer && same(hashToken(bearer), route.token_sha256)) return 'token';
  for (const part of (headers.cookie ?? '').split(';')) {
    const [name, value] = part.trim().split('=', 2);
    if (name !== SESSION_COOKIE || !value) continue;
    const [expires, sig] = value.split('.', 2);
    const at = Number(expires);
    if (sig && Number.isSafeInteger(at) && at * 1000 > now && same(sig, signature(route, at))) return 'session';
  }
  return undefined;
}

/**
 * The Set-Cookie value of a new session: host-only (the __Host- prefix: this instance's host and no other, only over
 * HTTPS, never set by a sibling host), out of scripts' reach, and not sent by requests another site starts.
 */
export function sessionCookie(route: Route, now = Date.now()): string {
  const expires = Math.floor(now / 1000) + SESSION_SECONDS;
  return `${SESSION_COOKIE}=${expires}.${signature(route, expires)}; Path=/; Max-Age=${SESSION_SECONDS}; Secure; HttpOnly; SameSite=Strict`;
}
