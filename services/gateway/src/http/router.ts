import type { IncomingMessage, ServerResponse } from 'node:http';
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
  /** The caller, once a token was verified (for the access log). */
  userId: string | undefined = undefined;
  private readonly search: string;
  private parsedQuery: Record<string, string | string[] | undefined> | undefined;

  constructor(raw: IncomingMessage, path: string, search: string, requestId: string) {
    this.raw = raw;
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

  /** The client address; X-Forwarded-For is believed only from a proxy on this host (loopback). */
  get ip(): string {
    return clientIp(this.raw.socket.remoteAddress ?? '', this.get('x-forwarded-for'));
  }
}

/** Returns the JSON body to send (the status is res.statusCode, 200 unless set), or nothing after answering itself. */
export type RouteHandler = (req: ApiRequest, res: ServerResponse) => Promise<unknown> | unknown;

interface Route {
  segments: string[];
  /** Index → parameter name for the ":name" segments. */
  params: [number, string][];
  handler: RouteHandler;
}

export type Match = { handler: RouteHandler; params: Record<string, string> } | { allowed: string[] } | undefined;

/**
 * Method + path patterns with ":name" segments. Paths match case-insensitively and with or without a
 * trailing slash, as they did under Express; parameters are percent-decoded.
 */
export class Router {
  private readonly exact = new Map<string, Map<string, RouteHandler>>();
  private readonly patterns: { method: string; route: Route }[] = [];

  add(method: Method, path: string, handler: RouteHandler): void {
    const m = method.toUpperCase();
    const segments = split(path).map((s) => (s.startsWith(':') ? s : s.toLowerCase()));
    const params = segments.flatMap((s, i) => (s.startsWith(':') ? [[i, s.slice(1)] as [number, string]] : []));
    if (params.length === 0) {
      const key = `/${segments.join('/')}`;
      const byMethod = this.exact.get(key) ?? new Map<string, RouteHandler>();
      if (byMethod.has(m)) throw new Error(`duplicate route ${m} ${path}`);
      byMethod.set(m, handler);
      this.exact.set(key, byMethod);
    } else {
      this.patterns.push({ method: m, route: { segments, params, handler } });
    }
  }

  /** The handler for method + path, the methods the path allows when the method is not one of them, or undefined. */
  find(method: string, path: string): Match {
    const m = method === 'HEAD' ? 'GET' : method;
    const segments = split(path);
    const key = `/${segments.join('/')}`.toLowerCase();
    const byMethod = this.exact.get(key);
    if (byMethod) {
      const handler = byMethod.get(m);
      return handler ? { handler, params: NO_PARAMS } : { allowed: [...byMethod.keys()] };
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
      return { handler: route.handler, params };
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

const isLoopback = (a: string) => a === '::1' || a.startsWith('127.') || a.startsWith('::ffff:127.');

/** The first address, from the right, that is not a proxy on this host. */
export function clientIp(peer: string, forwarded: string | undefined): string {
  if (!forwarded || !isLoopback(peer)) return peer;
  const hops = forwarded.split(',').map((h) => h.trim()).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) if (!isLoopback(hops[i]!)) return hops[i]!;
  return hops[0] ?? peer;
}
