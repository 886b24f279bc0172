import { ERROR_CODES } from '@agenthost/shared';
import { CLIENT_HEADER, STALE_ROUTE_PATH, UPSTREAM_HEADER } from './answer.ts';
import { SESSION_HEADER } from './owner.ts';
import { adminSocket, dataDir, keeperSocket, type EdgeSettings } from './settings.ts';

// Caddy's JSON configuration (https://caddyserver.com/docs/json/), loaded once when Caddy starts and never changed
// while it runs: the API, the dashboard's place, instance hosts (routed by the keeper's answers) and the error
// answers. Its admin API listens on a unix socket only.

export const SERVER = 'edge';
const BASE_ID_PREFIX = 'agenthost-';

type Json = Record<string, unknown>;
type Code = keyof typeof ERROR_CODES;

const HSTS = { handler: 'headers', response: { set: { 'Strict-Transport-Security': ['max-age=31536000'] } } };

/** An answer the edge gives itself, in the API's error shape. */
export function errorAnswer(code: Code, opts: { message?: string; retryAfter?: number } = {}): Json {
  const { status, message } = ERROR_CODES[code];
  return {
    handler: 'static_response',
    status_code: status,
    headers: {
      'Content-Type': ['application/json'],
      'Cache-Control': ['no-store'],
      ...(opts.retryAfter ? { 'Retry-After': [String(opts.retryAfter)] } : {}),
    },
    body: JSON.stringify({ error: opts.message ?? message, code, status }),
    close: false,
  };
}

/**
 * Every instance host: Caddy first asks the route keeper (a request with the client's host, address and credentials,
 * without its body); 204 names the agent's address and the request goes there (HTTP or WebSocket), any other answer
 * (unknown, starting, stopped, failed, or not for a stranger: answer.ts) goes to the client as it is. The configuration
 * never changes with instances.
 */
function instanceRoutes(s: EdgeSettings): Json {
  return {
    '@id': `${BASE_ID_PREFIX}instances`,
    match: [{ host: [`*.${s.EDGE_DOMAIN}`] }],
    handle: [HSTS, viaKeeper(s, '/route')],
    terminal: true,
  };
}

/** Ask the keeper at `uri` for the request's route, and proxy there on its 204. */
function viaKeeper(s: EdgeSettings, uri: string): Json {
  return {
    handler: 'reverse_proxy',
    upstreams: [{ dial: `unix/${keeperSocket(s)}` }],
    rewrite: { method: 'GET', uri },
    headers: {
      request: {
        // The client's connection, which the keeper follows for idle sleep (activity.ts); set over whatever the client sent.
        set: { [CLIENT_HEADER]: ['{http.request.remote}'] },
        delete: ['Upgrade', 'Connection', 'Sec-WebSocket-Key', 'Sec-WebSocket-Protocol'],
      },
    },
    // The keeper holds its answer while a sleeping instance wakes.
    transport: { protocol: 'http', dial_timeout: '1s', response_header_timeout: `${s.EDGE_WAKE_TIMEOUT_SECONDS + 5}s` },
    handle_response: [
      // The owner's request with its token: the answer also starts the browser's session on this host (owner.ts).
      {
        match: { status_code: [204], headers: { [SESSION_HEADER]: [] } },
        routes: [{ handle: [{ handler: 'headers', response: { add: { 'Set-Cookie': [`{http.reverse_proxy.header.${SESSION_HEADER}}`] } } }, ...toAgent(s)] }],
      },
      { match: { status_code: [204] }, routes: [{ handle: toAgent(s) }] },
    ],
  };
}

/** The request, proxied to the agent the keeper named (HTTP or WebSocket). */
function toAgent(s: EdgeSettings): Json[] {
  return [
    { handler: 'request_body', max_size: s.EDGE_BODY_LIMIT_BYTES },
    {
      handler: 'reverse_proxy',
      upstreams: [{ dial: '{http.reverse_proxy.header.X-Agenthost-Upstream}' }],
      // Idle connections to agents are not kept long (a stopped agent's are of no use).
      transport: { protocol: 'http', dial_timeout: `${s.EDGE_DIAL_TIMEOUT_SECONDS}s`, keep_alive: { idle_timeout: '5s' } },
      // No forwarded-client headers: an agent that does not trust its proxy refuses such traffic (OpenClaw
      // does), and trusting the bridge's address would trust everything else on this host too. The
      // agent checks the browser's Origin against the instance's public address instead.
      headers: { request: { delete: [UPSTREAM_HEADER, CLIENT_HEADER, 'X-Forwarded-For', 'X-Forwarded-Proto', 'X-Forwarded-Host'] } },
      // Streamed answers (server-sent events) are passed on as they come.
      flush_interval: -1,
    },
  ];
}

/** The gateway replicas; only a request that reached none (a dial error) is tried on another (see deploy/swarm). */
function gatewayProxy(s: EdgeSettings): Json {
  const [dnsName, dnsPort] = s.EDGE_GATEWAYS_DNS.split(/:(?=\d+$)/);
  return {
    handler: 'reverse_proxy',
    ...(dnsName
      ? { dynamic_upstreams: { source: 'a', name: dnsName, port: dnsPort, refresh: '1s' } }
      : { upstreams: s.EDGE_GATEWAYS.map((dial) => ({ dial })) }),
    load_balancing: { selection_policy: { policy: 'round_robin' }, try_duration: '3s', try_interval: '100ms', retry_match: [{ method: ['NONE'] }] },
    // No passive health checks: a body over the limit fails the proxying too, and would take the gateway out of
    // rotation for everyone. A gateway that is down is a dial error, which the next replica is tried for.
    transport: { protocol: 'http', dial_timeout: `${s.EDGE_DIAL_TIMEOUT_SECONDS}s`, response_header_timeout: `${s.EDGE_API_TIMEOUT_SECONDS}s` },
    // X-Forwarded-For is the address the client connected from, written over whatever the client sent (Caddy does so
    // for any client not in trusted_proxies, and none are set): the gateway believes it on its edge socket.
    flush_interval: -1,
  };
}

/** Routes only instances call: they reach the gateway on their own network, never through the public edge. */
export const INSTANCE_ONLY_PATHS = [
  '/api/keys/retrieve',
  '/api/keys/retrieve/*',
  '/api/keys/watch',
  '/api/keys/watch/*',
  '/api/keys/applied',
  '/api/keys/applied/*',
];

export function baseConfig(s: EdgeSettings): Json {
  const domain = s.EDGE_DOMAIN;
  const acme = s.EDGE_ACME_EMAIL !== '';
  const port = s.EDGE_HTTPS_PORT === 443 ? '' : `:${s.EDGE_HTTPS_PORT}`;
  const listen = (port: number) => `${s.EDGE_BIND.includes(':') ? `[${s.EDGE_BIND}]` : s.EDGE_BIND}:${port}`;
  const issuer = acme ? { module: 'acme', email: s.EDGE_ACME_EMAIL, ...(s.EDGE_ACME_CA ? { ca: s.EDGE_ACME_CA } : {}) } : { module: 'internal' };
  const routes: Json[] = [
    {
      '@id': `${BASE_ID_PREFIX}api`,
      match: [{ host: [domain], path: ['/api', '/api/*'] }],
      handle: [
        HSTS,
        {
          handler: 'subroute',
          routes: [
            // Case and dot segments are normalised by Caddy before matching, so /API/keys/../keys/retrieve is caught too.
            { match: [{ path: INSTANCE_ONLY_PATHS }], handle: [errorAnswer('NOT_FOUND')] },
            { handle: [{ handler: 'request_body', max_size: s.EDGE_API_BODY_LIMIT_BYTES }, gatewayProxy(s)] },
          ],
        },
      ],
      terminal: true,
    },
    // The web dashboard: the gateways serve its built files (and answer 404 in the API's shape for other paths).
    {
      '@id': `${BASE_ID_PREFIX}dashboard`,
      match: [{ host: [domain] }],
      handle: [HSTS, { handler: 'request_body', max_size: s.EDGE_API_BODY_LIMIT_BYTES }, gatewayProxy(s)],
      terminal: true,
    },
    instanceRoutes(s),
  ];
  return {
    admin: { listen: `unix/${adminSocket(s)}`, config: { persist: false } },
    storage: { module: 'file_system', root: dataDir(s) },
    // Per-request error entries carry the request (an instance's URL may hold a token): the edge answers them in
    // the API's error shape instead of logging them.
    logging: { logs: { default: { level: 'ERROR', exclude: ['http.log.error'] } } },
    apps: {
      http: {
        http_port: s.EDGE_HTTP_PORT,
        // Each route change is a configuration reload: requests in flight finish on the configuration they began on.
        grace_period: `${s.EDGE_API_TIMEOUT_SECONDS}s`,
        https_port: s.EDGE_HTTPS_PORT,
        servers: {
          [SERVER]: {
            listen: [listen(s.EDGE_HTTPS_PORT)],
            read_header_timeout: `${s.EDGE_READ_HEADER_TIMEOUT_SECONDS}s`,
            read_timeout: `${s.EDGE_READ_TIMEOUT_SECONDS}s`,
            idle_timeout: `${s.EDGE_IDLE_TIMEOUT_SECONDS}s`,
            max_header_bytes: 64 * 1024,
            routes,
            errors: { routes: errorRoutes(s) },
            // ACME's HTTP challenge cannot issue a wildcard: with ACME, unknown instance hosts get no certificate.
            // With ACME, the wildcard (which needs a DNS challenge) is skipped: each instance host gets its own
            // certificate on demand, once the keeper says it is an instance.
            automatic_https: { disable_redirects: true, ...(acme ? { skip_certificates: [`*.${domain}`] } : {}) },
          },
          ...instanceListener(s, listen),
          // Caddy's own redirects leave out a port other than 443; this one keeps it. ACME's HTTP challenge is
          // answered before any route of a server on the HTTP port.
          redirect: {
            listen: [listen(s.EDGE_HTTP_PORT)],
            read_header_timeout: `${s.EDGE_READ_HEADER_TIMEOUT_SECONDS}s`,
            read_timeout: `${s.EDGE_READ_TIMEOUT_SECONDS}s`,
            routes: [
              {
                handle: [
                  {
                    handler: 'static_response',
                    status_code: 308,
                    headers: { Location: [`https://{http.request.host}${port}{http.request.uri}`] },
                    close: true,
                  },
                ],
              },
            ],
          },
        },
      },
      tls: {
        automation: {
          policies: [{ issuers: [issuer], ...(acme ? { on_demand: true } : {}) }],
          ...(acme ? { on_demand: { ask: `http://127.0.0.1:${s.EDGE_ASK_PORT}/ask` } } : {}),
        },
      },
      ...(acme ? {} : { pki: { certificate_authorities: { local: { install_trust: false, ...sharedRoot(s) } } } }),
    },
  };
}

/** No gateway answered (the public API host and the instances' listener alike). */
const apiUnavailable = (): Json => errorAnswer('SERVICE_UNAVAILABLE', { message: 'The API is unavailable; retry shortly', retryAfter: 1 });

/**
 * The intermediate every edge of a deployment issues with, under the deployment's one root (the swarm's shared CA).
 * The root is not given: Caddy 2.6 loads a root only with its key, which stays with the operator. Caddy then makes a
 * root of its own in its data that signs nothing (the intermediate, given, is never renewed by it) and no client trusts.
 */
const sharedRoot = (s: EdgeSettings): Json =>
  s.EDGE_CA_INTERMEDIATE_CERT_FILE
    ? { intermediate: { certificate: s.EDGE_CA_INTERMEDIATE_CERT_FILE, private_key: s.EDGE_CA_INTERMEDIATE_KEY_FILE, format: 'pem_file' } }
    : {};

/** The instances' own listener (EDGE_INSTANCE_PORT): plain HTTP, the whole API, no instance hosts, no dashboard. */
function instanceListener(s: EdgeSettings, listen: (port: number) => string): Json {
  if (!s.EDGE_INSTANCE_PORT) return {};
  return {
    instances: {
      listen: [listen(s.EDGE_INSTANCE_PORT)],
      read_header_timeout: `${s.EDGE_READ_HEADER_TIMEOUT_SECONDS}s`,
      idle_timeout: `${s.EDGE_IDLE_TIMEOUT_SECONDS}s`,
      automatic_https: { disable: true },
      routes: [
        {
          match: [{ path: ['/api', '/api/*'] }],
          handle: [{ handler: 'request_body', max_size: s.EDGE_API_BODY_LIMIT_BYTES }, gatewayProxy(s)],
          terminal: true,
        },
        { handle: [errorAnswer('NOT_FOUND')] },
      ],
      errors: { routes: [...requestErrorRoutes(s.EDGE_INSTANCE_PORT), { handle: [apiUnavailable()] }] },
    },
  };
}

/** What the edge answers when a handler failed: never Caddy's empty page, always the API's error shape. */
function errorRoutes(s: EdgeSettings): Json[] {
  const keeper = keeperSocket(s);
  return [
    ...requestErrorRoutes(s.EDGE_HTTPS_PORT),
    { match: [{ host: [s.EDGE_DOMAIN] }], handle: [apiUnavailable()] },
    // The route keeper is not running (its socket is named in the dial error).
    {
      match: [{ vars_regexp: { '{http.error.message}': { pattern: keeper.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') } } }],
      handle: [errorAnswer('SERVICE_UNAVAILABLE', { message: 'Instances cannot be reached through the edge right now; retry shortly', retryAfter: 1 })],
    },
    // The agent did not take the connection, so nothing of the request was sent: the keeper reads the route again and
    // the request goes where it says (a container stopped for sleep just before its event: held and woken). Once
    // only: a failure here is Caddy's to answer, and the keeper answers the same address with INSTANCE_UNREACHABLE.
    { match: [{ host: [`*.${s.EDGE_DOMAIN}`], vars_regexp: { '{http.error.message}': { pattern: '^dial tcp ' } } }], handle: [viaKeeper(s, STALE_ROUTE_PATH)] },
    { handle: [errorAnswer('INSTANCE_UNREACHABLE', { retryAfter: 2 })] },
  ];
}

/** The client's own faults, on any listener (port: the listener's): a body too slow or too large. */
function requestErrorRoutes(port: number): Json[] {
  const is = (status: number) => ({ expression: `{http.error.status_code} == ${status}` });
  return [
    // The client's body did not arrive within EDGE_READ_TIMEOUT_SECONDS: the proxy's error names the read from the
    // client's side of the connection (local address on the edge's port), unlike a dial or read toward an upstream.
    {
      match: [{ vars_regexp: { '{http.error.message}': { pattern: `read tcp \\S+:${port}->\\S+: i/o timeout` } } }],
      handle: [errorAnswer('REQUEST_TIMEOUT', { message: 'The request body was not received in time' })],
    },
    // A body over the limit that was announced by Content-Length reaches the proxy first, which reports it as a 502.
    { match: [is(413)], handle: [errorAnswer('PAYLOAD_TOO_LARGE')] },
    { match: [{ vars_regexp: { '{http.error.message}': { pattern: 'body too large' } } }], handle: [errorAnswer('PAYLOAD_TOO_LARGE')] },
  ];
}
