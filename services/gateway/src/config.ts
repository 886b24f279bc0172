import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { AssertionSigner, baseConfig, configInt, configList, tiersConfig } from '@agenthost/shared';

// Each setting's description is the text docs/configuration.md shows for it (deploy/config-doc.ts prints the page).
export const gatewayConfig = baseConfig
  .extend({
    GATEWAY_HOST: z
      .string()
      .default('0.0.0.0')
      .describe("The address of the TCP listener: every interface by default (the swarm's overlay); deploy/start.sh: `127.0.0.1`."),
    GATEWAY_PORT: configInt(8080).describe("The TCP listener's port."),
    GATEWAY_INSTANCE_BRIDGE: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{0,15}$/, 'must be a network interface name')
      .default('')
      .describe(
        "The host interface of the instance bridge (the provisioner's network): the gateway also listens on its IPv4 address, the one instances " +
          "are given, followed as the provisioner makes or remakes the network. Empty: none; deploy/start.sh: the instance network's interface.",
      ),
    GATEWAY_EDGE_SOCKET: z
      .union([z.literal(''), z.string().startsWith('/', 'must be an absolute path')])
      .default('')
      .describe(
        "A unix socket for the edge (Caddy) alone, in a directory only the edge's user reaches: `X-Forwarded-For` is believed on its connections, " +
          "as Caddy sets it to the client's address. Empty: none; deploy/start.sh: `$AGENTHOST_STATE/run/gateway/edge.sock`.",
      ),
    SHUTDOWN_GRACE_MS: configInt(0).describe(
      'On SIGTERM, keep answering this long, each answer closing its connection, before refusing new ones: a proxy that still sends here ' +
        '(its DNS not yet refreshed, a pooled connection) is answered instead of cut off. The swarm sets `3000`.',
    ),
    BODY_LIMIT_BYTES: configInt(64 * 1024).describe('Largest JSON body accepted (413 beyond).'),
    JWT_ISSUER: z.string().default('agenthost-auth').describe("The issuer claim a token must carry (auth's `JWT_ISSUER`)."),
    JWT_AUDIENCE: z.string().default('agenthost-api').describe("The audience claim a token must carry (auth's `JWT_AUDIENCE`)."),
    JWKS_REFRESH_SECONDS: configInt(60).describe(
      "How often auth's public keys are re-read: a key auth dropped stops verifying within this time, cached verifications included.",
    ),
    AUTH_JWT_PUBLIC_KEYS: z
      .string()
      .optional()
      .transform((v, ctx) => {
        if (!v) return undefined;
        try {
          const keys = JSON.parse(v) as Array<{ kty?: string; crv?: string; x?: string; kid?: string }>;
          if (
            Array.isArray(keys) &&
            keys.length > 0 &&
            keys.every((k) => k.kty === 'OKP' && k.crv === 'Ed25519' && typeof k.x === 'string' && typeof k.kid === 'string')
          )
            return keys;
        } catch {
          /* reported below */
        }
        ctx.addIssue({ code: 'custom', message: 'must be a JSON array of Ed25519 public JWKs, each with a kid' });
        return z.NEVER;
      })
      .meta({
        accepts: 'JSON',
        description: "Auth's public keys as a JWKS array (Ed25519 JWKs, each with a `kid`); when set, keys are never taken from the bus.",
      }),
    GATEWAY_ASSERTION_PRIVATE_KEY: z
      .string()
      .optional()
      .meta({
        description:
          'The Ed25519 private key (PKCS#8 PEM) that signs an assertion for each call the gateway makes for a user. deploy/start.sh makes ' +
          "`$AGENTHOST_STATE/secrets/gateway-assertion.pem`, readable by the gateway's user only, and gives its path as the `_FILE`.",
        shownDefault: 'required (unless `ASSERTIONS=off`)',
      }),
    KEYVAULT_SEAL_PUBLIC_KEY: z
      .string({ error: "is required: keyvault's X25519 public key, base64 of 32 bytes" })
      .refine((v) => Buffer.from(v.trim(), 'base64').length === 32, 'must be base64 of a 32-byte X25519 public key')
      .describe(
        "keyvault's X25519 public key (base64 of the raw 32 bytes): provider keys are sealed to it before they reach the bus. " +
          'deploy/start.sh derives it from `keyvault-seal.pem`.',
      ),
    NATS_REQUEST_TIMEOUT_MS: configInt(5000).describe('Timeout of a forwarded call; a backend that does not answer in time gives a 503.'),
    TIER_LIMITS_JSON: tiersConfig,
    ENTITLEMENT_CACHE_TTL_MS: configInt(5000).describe(
      "How long a wallet's subscription is reused in memory before billing-chain is asked again (change events refresh it sooner).",
    ),
    ENTITLEMENT_RESTART_WAIT_MS: configInt(5000).describe(
      'A request whose subscription is not cached waits this long for billing-chain when no replica of it is running (one restarting), ' +
        'instead of failing at once; a billing-chain that is up but slow still fails after `NATS_REQUEST_TIMEOUT_MS`.',
    ),
    UNCOUNTED_REQUESTS_PER_MINUTE: configInt(60).describe(
      'Requests per minute per user (per replica) of signed-in callers without a subscription, and of registrations; 429 beyond.',
    ),
    // The sign-in limits are counted in Postgres, so every replica shares them, and never per wallet alone: a wallet's
    // address is public, so a stranger could lock its owner out.
    NONCES_PER_ADDRESS: configInt(30).describe(
      'Nonces per client address in each `SIGN_IN_WINDOW_SECONDS`, counted in Postgres (every replica shares them); 429 `RATE_LIMITED` with `Retry-After` beyond.',
    ),
    NONCES_PER_WALLET: configInt(10).describe(
      'Nonces per wallet from one client address in each `SIGN_IN_WINDOW_SECONDS`. Nothing counts per wallet alone: its address is public, ' +
        'so a stranger could lock its owner out.',
    ),
    LOGINS_PER_ADDRESS: configInt(30).describe('Logins (every attempt) per client address in each `SIGN_IN_WINDOW_SECONDS`; 429 `RATE_LIMITED` beyond.'),
    LOGINS_PER_WALLET: configInt(10).describe(
      'Failed logins (a signature or nonce auth refused) per wallet from one client address in each `SIGN_IN_WINDOW_SECONDS`; a successful ' +
        'login never counts against its wallet.',
    ),
    SIGN_IN_WINDOW_SECONDS: configInt(60).describe('The window of the sign-in limits.'),
    USAGE_PREFETCH_MAX: configInt(5000).describe(
      'Largest block of quota a replica leases at once (usage counting costs one write per block, not per request).',
    ),
    TRUSTED_PROXIES: configList()
      .refine(
        (l) => l.every((e) => /^[0-9a-fA-F:.]+(\/\d{1,3})?$/.test(e) && isIP(e.split('/')[0]!) !== 0),
        'must be comma-separated IP addresses or CIDR ranges',
      )
      .describe('Proxies (addresses or CIDR ranges) whose `X-Forwarded-For` is believed; from anyone else the header is ignored.'),
    CORS_ORIGINS: configList()
      .refine((l) => l.every(isOrigin), 'must be comma-separated origins such as https://app.example.com (no path, no trailing slash)')
      .describe(
        'Browser origins (`https://app.example.com`: no path, no trailing slash) whose pages may call the API: a preflight from one gets the ' +
          'origin echoed, methods `GET, HEAD, POST, PUT, DELETE`, headers `Authorization, Content-Type, Idempotency-Key, X-Request-ID` (cached ' +
          '10 min); answers expose `X-Request-ID`, `X-Usage-Remaining`, `X-Subscription-Tier`, `X-Subscription-Expires` and `Retry-After`. Any ' +
          'other origin gets no CORS header; a plain `OPTIONS` still answers 204 with `Allow`. The dashboard, served by the gateway, needs none.',
      ),
    USAGE_IDLE_RETURN_MS: configInt(5000).describe('A leased quota block unused this long goes back to the shared counter.'),
    USAGE_LEASE_TTL_SECONDS: configInt(10).describe(
      'A replica whose heartbeat is older than this is taken for dead: another replica gives back the quota it leased and did not serve. ' +
        'A replica stops serving from its blocks after ¾ of it without a heartbeat, so nothing it serves is reclaimed, unless the ' +
        'database cannot be reached at all (`OUTAGE_SERVE_SECONDS`).',
    ),
    OUTAGE_SERVE_SECONDS: configInt(300).describe(
      'While Postgres (or billing-chain) cannot be reached, how long after it last answered a replica keeps serving: metered requests ' +
        'from the quota blocks it holds, with their counts kept in memory and written once the database is back; subscriptions, and ' +
        'the subscription status, instance list and instance status a caller last read, from memory (with `Age`). Past it, and for every ' +
        'write, 503 `SERVICE_UNAVAILABLE`.',
    ),
    KEYS_APPLY_WAIT_MS: configInt(35000).describe(
      'How long a key change waits for the running instance to reload its keys before answering `applied: false`. Longer than the ' +
        "bootstrap's own limit for a reload that rewires OpenClaw's provider settings (30 s; 4 s for a plain reload).",
    ),
    KEYS_WATCH_MAX_SECONDS: configInt(600).describe(
      'A key watch (`GET /keys/watch`) is ended after this long; the bootstrap reconnects and authenticates again.',
    ),
    IDEMPOTENCY_TTL_HOURS: configInt(24).describe('How long the first answer to an `Idempotency-Key` is kept and replayed.'),
    IDEMPOTENCY_WAIT_SECONDS: configInt(30).describe(
      'How long a duplicate waits for the answer of the request with its key still in flight before 409 `IDEMPOTENCY_KEY_IN_FLIGHT`.',
    ),
    IDEMPOTENCY_IN_FLIGHT_SECONDS: configInt(60).describe(
      'A key still unanswered after this long belongs to a request whose gateway died: its outcome is unknown and it is never run again ' +
        '(409 with outcome `unknown`). Longer than any forwarded call (25 s for container verbs).',
    ),
    SSE_HEARTBEAT_SECONDS: configInt(15).describe(
      'Seconds between the comment lines (`: heartbeat`) that keep an idle event stream (`GET /instance/events`) open through proxies.',
    ),
    STREAMS_PER_USER: configInt(20).describe(
      'Long-lived streams a user holds open at once, event streams and log follows together (key watches count per instance only), counted ' +
        'in Postgres across replicas; 429 `RATE_LIMITED` with `Retry-After` beyond. A dashboard tab holds one of each for the instance it shows; ' +
        '20 leaves room for several tabs and a CLI.',
    ),
    STREAMS_PER_INSTANCE: configInt(5).describe(
      "One instance's long-lived streams of one kind (events, logs, key watches) open at once, counted in Postgres across replicas; 429 " +
        '`RATE_LIMITED` with `Retry-After` beyond.',
    ),
    STREAM_MAX_SECONDS: configInt(3600).describe(
      'An event stream or log follow ends cleanly after this long; the client resumes with `Last-Event-ID` (one older than the event stream ' +
        'keeps: 410 `LAST_EVENT_ID_EXPIRED`).',
    ),
    WEBHOOKS: z
      .enum(['on', 'off'])
      .default('on')
      .describe('`off`: this deployment offers no webhooks: no consumer reads the event streams for them, and the routes answer 501 `WEBHOOKS_UNAVAILABLE`.'),
    WEBHOOKS_PER_USER: configInt(10).describe('Outbound webhook endpoints per user (403 `WEBHOOK_LIMIT_EXCEEDED` beyond).'),
    WEBHOOK_ALLOW_HOSTS: z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim().toLowerCase())
          .filter(Boolean),
      )
      .meta({
        accepts: 'comma-separated list',
        description:
          'Hosts (names or addresses) a webhook may reach although they are or resolve to private, loopback or link-local addresses: for ' +
          'tests and for receivers on a private network. https is required all the same.',
      }),
    WEBHOOK_CA_FILE: z
      .string()
      .optional()
      .describe("A PEM file of CA certificates trusted for webhook receivers besides the system's (a private receiver's CA)."),
    GATEWAY_DATA_KEY: z
      .string()
      .optional()
      .refine((v) => v === undefined || v === '' || Buffer.from(v.trim(), 'base64').length === 32, 'must be base64 of 32 bytes')
      .meta({
        description:
          'base64 of 32 bytes: seals (AES-256-GCM) what the gateway schema keeps that holds a secret: webhook signing secrets and the answers ' +
          "kept for `Idempotency-Key` (a create's answer holds the access token). Neither it nor `GATEWAY_ASSERTION_PRIVATE_KEY` set: webhooks " +
          'answer 501 `WEBHOOKS_UNAVAILABLE`, and kept answers are sealed under a key of the process, so a replay from another replica answers ' +
          '409 `IDEMPOTENCY_KEY_IN_FLIGHT` with the outcome unknown.',
        shownDefault: 'derived from `GATEWAY_ASSERTION_PRIVATE_KEY`',
      }),
    WEBHOOK_SECRET_OVERLAP_HOURS: configInt(24).describe('After a rotation the previous secret signs too (a second `v1` signature) for this long.'),
    WEBHOOK_RETRY_BASE_MS: configInt(5000).describe(
      'The first retry of a delivery waits this long; each next one twice as long (at most an hour), for `WEBHOOK_RETRY_HOURS`.',
    ),
    WEBHOOK_RETRY_HOURS: configInt(24).describe('How long a delivery is retried.'),
    WEBHOOK_TIMEOUT_MS: configInt(10_000).describe('A receiver that has not answered in this long counts as a failed attempt.'),
    WEBHOOK_MAX_PAYLOAD_BYTES: configInt(64 * 1024).describe('Largest delivery body; a larger event is recorded as failed, never sent.'),
    WEBHOOK_POLL_MS: configInt(1000).describe('How often each replica looks for due deliveries (new events wake it at once).'),
    DASHBOARD_DIR: z
      .string()
      .default(fileURLToPath(new URL('../../../packages/dashboard/dist', import.meta.url)))
      .meta({
        description: "The dashboard's built files, served at `/` (not served, with a warning, when the directory holds no `index.html`).",
        shownDefault: "the repository's `packages/dashboard/dist`",
      }),
    DASHBOARD_SOLANA_RPC_URL: z
      .string()
      .url()
      .default(process.env.SOLANA_RPC_URL || 'http://127.0.0.1:8899')
      .meta({
        description:
          "The Solana JSON-RPC URL as users' browsers reach it (the page reads blockhashes, balances and confirmations there; it is also the " +
          "page's only `connect-src` besides itself).",
        shownDefault: '`SOLANA_RPC_URL`, else `http://127.0.0.1:8899`',
      }),
    DASHBOARD_SOLANA_CHAIN: z
      .enum(['solana:mainnet', 'solana:devnet', 'solana:testnet', 'solana:localnet'])
      .default('solana:localnet')
      .describe('The Wallet Standard chain the page asks wallets to sign for.'),
    SUBSCRIPTION_PROGRAM_ID: z
      .string()
      .optional()
      .meta({ description: 'The subscription program, for the page; needed on a real cluster.', shownDefault: 'unset: the page asks devchain' }),
    TREASURY: z
      .string()
      .optional()
      .meta({ description: "The subscription program's treasury, for the page; needed on a real cluster.", shownDefault: 'unset: the page asks devchain' }),
    DASHBOARD_TIER_PRICES_LAMPORTS: z
      .string()
      .optional()
      .transform((v, ctx) => {
        if (!v) return undefined;
        try {
          const p = JSON.parse(v) as Record<string, unknown>;
          if (['free', 'pro', 'enterprise'].every((t) => Number.isSafeInteger(p[t]))) return p as { free: number; pro: number; enterprise: number };
        } catch {
          /* reported below */
        }
        ctx.addIssue({ code: 'custom', message: 'must be JSON {"free":n,"pro":n,"enterprise":n} in lamports' });
        return z.NEVER;
      })
      .meta({
        accepts: 'JSON',
        description: 'Tier prices in lamports per 30 days, for the page (`{"free":0,"pro":100000000,"enterprise":500000000}`); needed on a real cluster.',
        shownDefault: 'unset: the page asks devchain',
      }),
  })
  .superRefine((c, ctx) => {
    if (c.ASSERTIONS === 'off') return;
    try {
      new AssertionSigner(c.GATEWAY_ASSERTION_PRIVATE_KEY ?? '');
    } catch {
      // Never quotes the value: it is a private key.
      ctx.addIssue({
        code: 'custom',
        path: ['GATEWAY_ASSERTION_PRIVATE_KEY'],
        message: 'is required: the Ed25519 private key (PKCS#8 PEM) that signs assertions for the backends',
      });
    }
  });

export type GatewayConfig = z.output<typeof gatewayConfig>;

/** An origin as a browser sends it in the Origin header: scheme, host and port only. */
function isOrigin(v: string): boolean {
  try {
    return /^https?:$/.test(new URL(v).protocol) && new URL(v).origin === v;
  } catch {
    return false;
  }
}
