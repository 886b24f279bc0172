import type { IncomingMessage, ServerResponse } from 'node:http';
import { BlockList, isIPv4 } from 'node:net';
import querystring from 'node:querystring';
import { AppError } from '@agenthost/shared';

export type Method = 'get' | 'post' | 'put' | 'delete';

/**
 * One API request as the routes see it. The gateway serves a small, fixed set of routes, so it uses
 * this router on node:http instead of Express: Express walked every layer of every mounted router and
 * allocated ~25 KB per request, and the garbage it made was the gateway's main source of latency spikes.
 */
export class ApiRequest {
  readonly raw: IncomingMessage;
  readonly method: string;
  /** The path below /api, without the query string. */
  readonly path: string;
  readonly requestId: string;
  params: Record<string, string> = NO_PARAMS;
  /** The parsed JSON body; undefined when the request had none. */
  body: unknown = undefined;
  /** The matched route's pattern (/instances/:id), for the metrics; 'unmatched' when none matched. */
  route = 'unmatched';
  /** The caller, once a token was verified (for the access log). */
  userId: string | undefined = undefined;
  private readonly search: string;
  private parsedQuery: Record<string, string | string[] | undefined> | undefined;

  private readonly proxies: BlockList | undefined;

  constructor(raw: IncomingMessage, path: string, search: string, requestId: string, proxies?: BlockList) {
    this.raw = raw;
    this.proxies = proxies;
    this.method = raw.method ?? 'GET';
    this.path = path;
    this.search = search;
    this.requestId = requestId;
  }

  get(name: string): string | undefined {
    const v = this.raw.headers[name];
    return Array.isArray(v) ? v.join(', ') : v;
  }

  get query(): Record<string, string | string[] | undefined> {
    return (this.parsedQuery ??= this.search ? querystring.parse(this.search) : {});
  }

  /** The client address; X-Forwarded-For is believed only from a configured proxy (TRUSTED_PROXIES). */
  get ip(): string {
    return clientIp(this.raw.socket.remoteAddress ?? '', this.get('x-forwarded-for'), this.proxies);
  }
}

/** Returns the JSON body to send (the status is res.statusCode, 200 unless set), or nothing after answering itself. */
export type RouteHandler = (req: ApiRequest, res: ServerResponse) => Promise<unknown> | unknown;

interface Route {
  segments: string[];
  /** Index → parameter name for the ":name" segments. */
  params: [number, string][];
  handler: RouteHandler;
  path: string;
}

export type Match = { handler: RouteHandler; params: Record<string, string>; route: string } | { allowed: string[] } | undefined;

/**
 * Method + path patterns with ":name" segments. Paths match case-insensitively and with or without a
 * trailing slash, as they did under Express; parameters are percent-decoded.
 */
export class Router {
  private readonly exact = new Map<string, Map<string, { handler: RouteHandler; path: string }>>();
  private readonly patterns: { method: string; route: Route }[] = [];

  add(method: Method, path: string, handler: RouteHandler): void {
    const m = method.toUpperCase();
    const segments = split(path).map((s) => (s.startsWith(':') ? s : s.toLowerCase()));
    const params = segments.flatMap((s, i) => (s.startsWith(':') ? [[i, s.slice(1)] as [number, string]] : []));
    if (params.length === 0) {
      const key = `/${segments.join('/')}`;
      const byMethod = this.exact.get(key) ?? new Map<string, { handler: RouteHandler; path: string }>();
      if (byMethod.has(m)) throw new Error(`duplicate route ${m} ${path}`);
      byMethod.set(m, { handler, path });
      this.exact.set(key, byMethod);
    } else {
      this.patterns.push({ method: m, route: { segments, params, handler, path } });
    }
  }

  /** The handler for method + path, the methods the path allows when the method is not one of them, or undefined. */
  find(method: string, path: string): Match {
    const m = method === 'HEAD' ? 'GET' : method;
    const segments = split(path);
    const key = `/${segments.join('/')}`.toLowerCase();
    const byMethod = this.exact.get(key);
    if (byMethod) {
      const found = byMethod.get(m);
      return found ? { handler: found.handler, params: NO_PARAMS, route: found.path } : { allowed: [...byMethod.keys()] };
    }
    const allowed: string[] = [];
    for (const { method: rm, route } of this.patterns) {
      if (!matches(route, segments)) continue;
      if (rm !== m) {
        allowed.push(rm);
        continue;
      }
      const params: Record<string, string> = {};
      for (const [i, name] of route.params) params[name] = decodeParam(segments[i]!);
      return { handler: route.handler, params, route: route.path };
    }
    return allowed.length ? { allowed } : undefined;
  }
}

const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

const split = (path: string): string[] => path.split('/').filter((s) => s !== '');

function matches(route: Route, segments: string[]): boolean {
  if (route.segments.length !== segments.length) return false;
  for (let i = 0; i < segments.length; i++) {
    const s = route.segments[i]!;
    if (s.startsWith(':')) continue;
    if (s !== segments[i]!.toLowerCase()) return false;
  }
  return true;
}

function decodeParam(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new AppError('VALIDATION_FAILED', 'The path has malformed percent-encoding');
  }
}

/** The proxies whose X-Forwarded-For is believed: addresses and CIDR ranges, IPv4 or IPv6 (TRUSTED_PROXIES). */
export function trustedProxies(list: string[]): BlockList {
  const trusted = new BlockList();
  for (const entry of list) {
    const [addr, bits] = entry.split('/') as [string, string | undefined];
    const type = isIPv4(addr) ? 'ipv4' : 'ipv6';
    if (bits === undefined) trusted.addAddress(addr, type);
    else trusted.addSubnet(addr, Number(bits), type);
  }
  return trusted;
}

const unmapped = (a: string) => (a.startsWith('::ffff:') && isIPv4(a.slice(7)) ? a.slice(7) : a);
const isTrusted = (proxies: BlockList, a: string) => {
  const addr = unmapped(a);
  return proxies.check(addr, isIPv4(addr) ? 'ipv4' : 'ipv6');
};

/**
 * The client address: the peer, unless the peer is a trusted proxy; then the first address of
 * X-Forwarded-For, from the right, that is not a trusted proxy. With no trusted proxies (the default),
 * X-Forwarded-For is never believed: anyone can send it.
 */
export function clientIp(peer: string, forwarded: string | undefined, proxies: BlockList | undefined): string {
  if (!forwarded || !proxies || !isTrusted(proxies, peer)) return peer;
  const hops = forwarded.split(',').map((h) => h.trim()).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) if (!isTrusted(proxies, hops[i]!)) return hops[i]!;
  return hops[0] ?? peer;
}
