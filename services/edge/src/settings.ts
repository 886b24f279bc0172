import { join } from 'node:path';
import { z } from 'zod';
import { configInt } from '@agenthost/shared';

const state = () => process.env.AGENTHOST_STATE || '/var/lib/agenthost';
const hostPort = z.string().regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be host:port');

/**
 * The edge's settings, read both by the base configuration Caddy starts with (write-config.ts) and by the
 * route keeper (main.ts), so the two always agree on the domain and the answers the edge gives itself. Each setting's
 * description is the text docs/configuration.md shows for it (deploy/config-doc.ts prints the page).
 */
export const edgeSettings = z.object({
  EDGE_DOMAIN: z
    .string()
    .regex(/^(?=.{1,200}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'must be a lower-case domain name')
    .default('agenthost.localhost')
    .describe('The API is `https://<domain>/api`, an instance `https://<instance_id>.<domain>/`, the dashboard `https://<domain>/`.'),
  EDGE_HTTPS_PORT: configInt(443).describe("The edge's HTTPS port."),
  EDGE_HTTP_PORT: configInt(80).describe("The edge's plain HTTP port: it only redirects to HTTPS (and answers ACME's HTTP challenge)."),
  EDGE_BIND: z.string().default('').describe('The address the edge listens on; empty: every interface.'),
  EDGE_ADMIN_SOCKET: z.string().default('').meta({
    description: "Caddy's admin API: a unix socket only (never a TCP port), readable by root and the edge's user.",
    shownDefault: 'empty: `$AGENTHOST_STATE/edge/admin.sock`',
  }),
  EDGE_KEEPER_SOCKET: z.string().default('').meta({
    description: "The route keeper's answers to Caddy (a unix socket that only the edge's user reaches).",
    shownDefault: 'empty: `$AGENTHOST_STATE/edge/keeper.sock`',
  }),
  EDGE_ASK_PORT: configInt(9180).describe(
    'ACME only: the loopback port where Caddy asks the route keeper whether a host is an instance before getting it a certificate.',
  ),
  EDGE_DATA_DIR: z.string().default('').meta({
    description: "Caddy's data: certificates, and the local CA (`pki/authorities/local/root.crt`).",
    shownDefault: 'empty: `$AGENTHOST_STATE/edge/data`',
  }),
  EDGE_GATEWAYS: z
    .string()
    .default('127.0.0.1:8080')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.union([hostPort, z.string().regex(/^unix\/\/\S+$/, 'must be host:port or unix/<absolute path>')])).min(1))
    .meta({
      accepts: 'comma-separated list',
      description:
        "The gateway replicas (`host:port`), or `unix/<path>` of the gateway's socket for the edge (`GATEWAY_EDGE_SOCKET`): the gateway " +
        'believes `X-Forwarded-For` only there. deploy/start.sh: `unix/<GATEWAY_EDGE_SOCKET>`.',
    }),
  EDGE_GATEWAYS_DNS: z
    .union([z.literal(''), hostPort])
    .default('')
    .describe(
      'The gateway replicas by DNS instead (`host:port`: every address the name has, read again each second); set, it replaces ' +
        '`EDGE_GATEWAYS`. The swarm: `tasks.agenthost-gateway:8080`.',
    ),
  EDGE_INSTANCE_PORT: configInt(0).describe(
    'A plain-HTTP listener for instances only (`0`: none): the whole API, the routes only instances call included. On the swarm an instance ' +
      "reaches the API at its node's edge on this port (the stack sets `EDGE_PORT`); never open it to users (README).",
  ),
  EDGE_CA_INTERMEDIATE_CERT_FILE: z
    .string()
    .default('')
    .describe(
      "The local CA's intermediate certificate (PEM; the file holds the chain up to the root), issued under the deployment's one root: set, " +
        'every edge that has it and its key issues under that root, so a client that trusts it is served by any of them (the swarm). ' +
        'Empty: Caddy makes its own root in its data.',
    ),
  EDGE_CA_INTERMEDIATE_KEY_FILE: z
    .string()
    .default('')
    .describe("The intermediate's key (PEM). The root's key is never given: an edge that leaks its files leaks no root (deploy/swarm/src/edge-ca.ts)."),
  EDGE_ACME_EMAIL: z
    .string()
    .default('')
    .describe(
      "Empty: certificates from Caddy's own local CA. An e-mail address: certificates from ACME (`EDGE_ACME_CA`; HTTP challenge, instance hosts on demand).",
    ),
  EDGE_ACME_CA: z.string().default('').describe("The ACME directory; empty: Caddy's default (Let's Encrypt, then ZeroSSL)."),
  EDGE_BODY_LIMIT_BYTES: configInt(16 * 1024 * 1024).describe(
    'Largest request body to an instance, 413 beyond (the gateway keeps its own, smaller limit for the API).',
  ),
  EDGE_API_BODY_LIMIT_BYTES: configInt(1024 * 1024).describe(
    'Largest request body to the API at the edge, 413 beyond (the gateway answers 413 beyond its `BODY_LIMIT_BYTES` anyway).',
  ),
  EDGE_READ_HEADER_TIMEOUT_SECONDS: configInt(10).describe('A client must send its request headers within this time (slow-header attacks).'),
  EDGE_READ_TIMEOUT_SECONDS: configInt(60).describe(
    'A client must send its whole request, headers and body, within this (slow-body attacks): past it the read fails and the edge answers ' +
      '408 `REQUEST_TIMEOUT`. It covers reading only: answers streamed back (server-sent events) and WebSockets last as long as they need. ' +
      'An upload to an instance must reach `EDGE_BODY_LIMIT_BYTES` / this many seconds (16 MiB in 60 s: about 280 KB/s).',
  ),
  EDGE_IDLE_TIMEOUT_SECONDS: configInt(120).describe('An idle keep-alive connection is closed after this.'),
  EDGE_API_TIMEOUT_SECONDS: configInt(60).describe('The gateway must start answering within this (it waits up to 25 s for instance operations).'),
  EDGE_DIAL_TIMEOUT_SECONDS: configInt(3).describe('An instance must accept the connection within this; a stopped one refuses at once.'),
  EDGE_WAKE_TIMEOUT_SECONDS: configInt(60).describe(
    'A request to a sleeping instance is held this long while it wakes; then 503 `INSTANCE_STARTING` with `Retry-After: 5`.',
  ),
});
export type EdgeSettings = z.output<typeof edgeSettings>;

export const adminSocket = (s: EdgeSettings): string => s.EDGE_ADMIN_SOCKET || join(state(), 'edge', 'admin.sock');
export const keeperSocket = (s: EdgeSettings): string => s.EDGE_KEEPER_SOCKET || join(state(), 'edge', 'keeper.sock');
export const dataDir = (s: EdgeSettings): string => s.EDGE_DATA_DIR || join(state(), 'edge', 'data');
/** An instance's public address, as the provisioner's INSTANCE_URL_TEMPLATE should give it. */
export const instanceUrlTemplate = (s: EdgeSettings): string => `https://{id}.${s.EDGE_DOMAIN}${s.EDGE_HTTPS_PORT === 443 ? '' : `:${s.EDGE_HTTPS_PORT}`}`;
