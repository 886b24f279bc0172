import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { AssertionSigner, baseConfig, configInt, configList, tiersConfig } from '@agenthost/shared';

export const gatewayConfig = baseConfig
  .extend({
    /** The address of the gateway's TCP listener. Every interface by default (the swarm's overlay); deploy/start.sh: 127.0.0.1. */
    GATEWAY_HOST: z.string().default('0.0.0.0'),
    GATEWAY_PORT: configInt(8080),
    /**
     * The host interface of the instance bridge (the provisioner's network): the gateway also listens on its IPv4
     * address, the one instances are given, followed as the provisioner makes or remakes the network. Empty: none.
     */
    GATEWAY_INSTANCE_BRIDGE: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{0,15}$/, 'must be a network interface name')
      .default(''),
    /**
     * A unix socket for the edge (Caddy) alone, in a directory only the edge's user reaches: X-Forwarded-For is
     * believed on its connections, as Caddy sets it to the address it was connected from. Empty: none.
     */
    GATEWAY_EDGE_SOCKET: z.union([z.literal(''), z.string().startsWith('/', 'must be an absolute path')]).default(''),
    /**
     * On SIGTERM, keep serving this long first, every answer closing its connection: a proxy that still sends here
     * (its DNS not yet refreshed, a pooled connection) is answered instead of cut off. The swarm sets 3000.
     */
    SHUTDOWN_GRACE_MS: configInt(0),
    /** Largest JSON body accepted (bytes). */
    BODY_LIMIT_BYTES: configInt(64 * 1024),
    JWT_ISSUER: z.string().default('agenthost-auth'),
    JWT_AUDIENCE: z.string().default('agenthost-api'),
    /** How often auth's public keys are re-read (a key auth dropped stops verifying within this time). */
    JWKS_REFRESH_SECONDS: configInt(60),
    /** Auth's public keys as a JWKS JSON array; when set, keys are never taken from the bus. */
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
      }),
    /** The gateway's Ed25519 private key (PKCS#8 PEM; or _FILE) that signs an assertion for each request it forwards for a user. */
    GATEWAY_ASSERTION_PRIVATE_KEY: z.string().optional(),
    /** keyvault's X25519 public key (base64 of the raw 32 bytes): provider keys are sealed to it before they reach the bus. */
    KEYVAULT_SEAL_PUBLIC_KEY: z
      .string({ error: "is required: keyvault's X25519 public key, base64 of 32 bytes" })
      .refine((v) => Buffer.from(v.trim(), 'base64').length === 32, 'must be base64 of a 32-byte X25519 public key'),
    /** Timeout of a forwarded call; a backend that does not answer in time gives a 503. */
    NATS_REQUEST_TIMEOUT_MS: configInt(5000),
    TIER_LIMITS_JSON: tiersConfig,
    /** How long a wallet's subscription is reused in memory before billing-chain is asked again (events refresh it sooner). */
    ENTITLEMENT_CACHE_TTL_MS: configInt(5000),
    /** A request whose subscription is not cached waits this long for a restarting billing-chain (no replica running) before its 503. */
    ENTITLEMENT_RESTART_WAIT_MS: configInt(5000),
    /** Requests per minute per user (per replica) of signed-in callers without a subscription, and of registrations. */
    UNCOUNTED_REQUESTS_PER_MINUTE: configInt(60),
    /**
     * Sign-in limits, counted in Postgres and so shared by every replica: nonces and logins per client address,
     * nonces and failed logins per wallet from one client address (never per wallet alone: its address is public),
     * in each SIGN_IN_WINDOW_SECONDS, then 429 RATE_LIMITED with Retry-After.
     */
    NONCES_PER_ADDRESS: configInt(30),
    NONCES_PER_WALLET: configInt(10),
    LOGINS_PER_ADDRESS: configInt(30),
    LOGINS_PER_WALLET: configInt(10),
    SIGN_IN_WINDOW_SECONDS: configInt(60),
    /** Largest block of quota a replica leases at once (usage counting costs one write per block, not per request). */
    USAGE_PREFETCH_MAX: configInt(5000),
    /** Proxies (addresses or CIDR ranges, comma-separated) whose X-Forwarded-For is believed; none by default. */
    TRUSTED_PROXIES: configList().refine(
      (l) => l.every((e) => /^[0-9a-fA-F:.]+(\/\d{1,3})?$/.test(e) && isIP(e.split('/')[0]!) !== 0),
      'must be comma-separated IP addresses or CIDR ranges',
    ),
    /**
     * Browser origins (scheme://host[:port], comma-separated) allowed to call the API from their pages (CORS); none by
     * default, so a browser app on another origin gets no CORS headers. The dashboard, served by the gateway itself,
     * needs none.
     */
    CORS_ORIGINS: configList().refine((l) => l.every(isOrigin), 'must be comma-separated origins such as https://app.example.com (no path, no trailing slash)'),
    /** A leased block unused this long goes back to the shared counter. */
    USAGE_IDLE_RETURN_MS: configInt(5000),
    /**
     * A replica whose heartbeat is older than this is taken for dead: another replica gives back the quota it
     * leased and did not serve. A replica stops serving from its blocks after 3/4 of it without a heartbeat.
     */
    USAGE_LEASE_TTL_SECONDS: configInt(10),
    /**
     * How long a key change waits for the running instance to reload its keys before answering applied: false. Longer
     * than the bootstrap's own limit for a reload that rewires OpenClaw's provider settings (12 s).
     */
    KEYS_APPLY_WAIT_MS: configInt(15000),
    /** A key watch (GET /keys/watch) is ended after this long; the bootstrap reconnects and authenticates again. */
    KEYS_WATCH_MAX_SECONDS: configInt(600),
    /** How long the first answer to an Idempotency-Key is kept and replayed. */
    IDEMPOTENCY_TTL_HOURS: configInt(24),
    /** How long a duplicate waits for the answer of the request with its key still in flight before a 409. */
    IDEMPOTENCY_WAIT_SECONDS: configInt(30),
    /**
     * A key still unanswered after this long belongs to a request whose gateway died: its outcome is unknown and it is
     * never run again (409 with outcome "unknown"). Longer than any forwarded call (25 s for container verbs).
     */
    IDEMPOTENCY_IN_FLIGHT_SECONDS: configInt(60),
    /** Seconds between the comment lines that keep an idle event stream (GET /instance/events) open through proxies. */
    SSE_HEARTBEAT_SECONDS: configInt(15),
    /**
     * Long-lived streams (event streams and log follows; key watches count per instance only), counted in Postgres across
     * replicas: a user's open at once, and one instance's of one kind. Over either: 429 RATE_LIMITED with Retry-After.
     * A dashboard tab holds one of each for the instance it shows; 20 and 5 leave room for several tabs and a CLI.
     */
    STREAMS_PER_USER: configInt(20),
    STREAMS_PER_INSTANCE: configInt(5),
    /** An event stream or log follow ends cleanly after this long; the client resumes with Last-Event-ID. */
    STREAM_MAX_SECONDS: configInt(3600),
    /** off: this deployment offers no webhooks (no consumer reads the event streams for them; the routes answer 501). */
    WEBHOOKS: z.enum(['on', 'off']).default('on'),
    /** Outbound webhooks: endpoints per user. */
    WEBHOOKS_PER_USER: configInt(10),
    /**
     * Hosts (names or addresses, comma-separated) a webhook may reach although they are or resolve to private, loopback
     * or link-local addresses: for tests and for receivers on a private network. https is required all the same.
     */
    WEBHOOK_ALLOW_HOSTS: z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim().toLowerCase())
          .filter(Boolean),
      ),
    /** A PEM file of CA certificates trusted for webhook receivers besides the system's (a private receiver's CA). */
    WEBHOOK_CA_FILE: z.string().optional(),
    /**
     * 32 bytes, base64: seals what the gateway schema keeps that holds a secret (webhook signing secrets, kept
     * Idempotency-Key answers). Unset: derived from GATEWAY_ASSERTION_PRIVATE_KEY.
     */
    GATEWAY_DATA_KEY: z
      .string()
      .optional()
      .refine((v) => v === undefined || v === '' || Buffer.from(v.trim(), 'base64').length === 32, 'must be base64 of 32 bytes'),
    /** After a rotation the previous secret signs too (a second v1 signature) for this long. */
    WEBHOOK_SECRET_OVERLAP_HOURS: configInt(24),
    /** The first retry waits this long; each next one twice as long (capped at an hour), for WEBHOOK_RETRY_HOURS. */
    WEBHOOK_RETRY_BASE_MS: configInt(5000),
    WEBHOOK_RETRY_HOURS: configInt(24),
    /** A receiver that has not answered in this long counts as a failed attempt. */
    WEBHOOK_TIMEOUT_MS: configInt(10_000),
    /** Largest delivery body; a larger event is recorded as failed, never sent. */
    WEBHOOK_MAX_PAYLOAD_BYTES: configInt(64 * 1024),
    /** How often each replica looks for due deliveries (new events wake it at once). */
    WEBHOOK_POLL_MS: configInt(1000),
    /** The dashboard's built files, served at / (none when the directory holds no index.html). */
    DASHBOARD_DIR: z.string().default(fileURLToPath(new URL('../../../packages/dashboard/dist', import.meta.url))),
    /** The Solana JSON-RPC URL as the user's browser reaches it (the page reads blockhashes and confirmations there). */
    DASHBOARD_SOLANA_RPC_URL: z
      .string()
      .url()
      .default(process.env.SOLANA_RPC_URL || 'http://127.0.0.1:8899'),
    /** The Wallet Standard chain the page asks wallets to sign for. */
    DASHBOARD_SOLANA_CHAIN: z.enum(['solana:mainnet', 'solana:devnet', 'solana:testnet', 'solana:localnet']).default('solana:localnet'),
    /** The subscription program and its treasury, for the page; when unset the page asks devchain. */
    SUBSCRIPTION_PROGRAM_ID: z.string().optional(),
    TREASURY: z.string().optional(),
    /** Tier prices in lamports per 30 days, for the page ({"free":0,"pro":…}); when unset the page asks devchain. */
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
