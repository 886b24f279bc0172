import { generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { SignJWT } from 'jose';
import type { Kysely } from 'kysely';
import type { NatsConnection } from 'nats';
import { AppError, createLogger, parseConfig, zodToAppError, type Contract } from '@agenthost/shared';
import { gatewayConfig } from '../src/config.ts';
import { buildContext, type GatewayContext } from '../src/context.ts';
import type { GatewayDB } from '../src/db/schema.ts';
import type { Call } from '../src/domain/call.ts';
import type { SignInLimits } from '../src/domain/sign-in-limits.ts';
import { Allowance } from '../src/domain/quota/allowance.ts';
import { TokenVerifier } from '../src/domain/tokens.ts';
import { buildApp } from '../src/http/app.ts';
import { answerClientError } from '../src/http/client-error.ts';
import type { Route } from '../src/http/route.ts';

// The gateway's HTTP layer in this process, for unit tests (`*.unit.test.ts`): the app of main.ts (buildApp, the
// clientError answer) built by buildContext, on an ephemeral loopback port, with no NATS, Postgres or other process.
// What would reach them is overridden: backend calls answer from `answers` (by subject) after the input is checked
// against the contract as the bus client checks it; the sign-in limits let everything through; the clock is the
// harness's. Tokens are verified by the real TokenVerifier with a key pinned through AUTH_JWT_PUBLIC_KEYS, and the
// allowance is the real one on the harness's clock. Anything else that would touch NATS or Postgres throws.

/** A clock a test moves by hand. */
export interface Clock {
  now(): number;
  advance(ms: number): void;
}

export function manualClock(start = Date.UTC(2030, 0, 1, 12, 0, 0)): Clock {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

/** A backend's answer to one contract: its output, or a throw (an AppError, as the backend would refuse). */
export type Answer = (input: unknown) => unknown;

export interface HarnessOptions {
  /** Gateway settings as environment variables, parsed as main.ts parses them. */
  env?: Record<string, string>;
  /** Backend answers by contract subject; a subject with none is a backend that is not running (503). */
  answers?: Record<string, Answer>;
  clock?: Clock;
  /** The routes to mount (the API's own by default). */
  routes?: (ctx: GatewayContext) => Route[];
  /** More parts to swap (given after the harness's own). */
  overrides?: Partial<GatewayContext>;
}

export interface Harness {
  /** http://127.0.0.1:<port>/api */
  baseUrl: string;
  port: number;
  ctx: GatewayContext;
  clock: Clock;
  /** The subjects of the backend calls made, in order. */
  calls: string[];
  /** The key the gateway trusts (pinned), and its kid. */
  signer: KeyObject;
  kid: string;
  /** An access token of a fresh user, valid for an hour by the harness's clock. */
  token(user?: { user_id?: string; wallet_address?: string }): Promise<string>;
  /** A request below /api. */
  send(method: string, path: string, body?: Buffer | string, headers?: Record<string, string>): Promise<Response>;
  /** A raw HTTP exchange on a new connection (requests fetch would refuse to send); resolves with all the server wrote. */
  raw(request: string): Promise<string>;
  close(): Promise<void>;
}

/** A part the unit harness does not have: any use of it fails the test with its name. */
function absent<T>(name: string): T {
  return new Proxy(
    {},
    {
      get(_t, prop) {
        if (prop === 'then' || typeof prop === 'symbol') return undefined;
        throw new Error(`${name}.${String(prop)}: not available in the gateway's unit harness (give an override, or test it with the stack)`);
      },
    },
  ) as T;
}

const WALLET = '11111111111111111111111111111111';

export async function startApp(opts: HarnessOptions = {}): Promise<Harness> {
  const clock = opts.clock ?? manualClock();
  const signer = generateKeyPairSync('ed25519');
  const kid = `unit-${randomUUID().slice(0, 8)}`;
  const jwk = { ...signer.publicKey.export({ format: 'jwk' }), kid, alg: 'EdDSA', use: 'sig' };
  const seal = Buffer.from(generateKeyPairSync('x25519').publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64');
  const config = parseConfig(gatewayConfig, {
    LOG_LEVEL: 'silent',
    KEYVAULT_SEAL_PUBLIC_KEY: seal,
    AUTH_JWT_PUBLIC_KEYS: JSON.stringify([jwk]),
    ASSERTIONS: 'off',
    ...opts.env,
  });
  const log = createLogger('gateway-unit', 'silent');
  const calls: string[] = [];
  const answers = opts.answers ?? {};
  const call: Call = async (c: Contract, input: unknown) => {
    calls.push(c.subject);
    // As request() does before anything reaches the bus.
    const parsed = c.input.safeParse(input);
    if (!parsed.success) throw zodToAppError(parsed.error);
    const answer = answers[c.subject];
    if (!answer) throw new AppError('SERVICE_UNAVAILABLE', `No backend answers ${c.subject} in the unit harness`, { retryable: true, retryAfter: 1 });
    return answer(parsed.data) as never;
  };
  const nc = absent<NatsConnection>('nc');
  const signInLimits = {
    nonce: async () => {},
    login: <T>(_address: string, _wallet: unknown, attempt: () => Promise<T>) => attempt(),
  } as unknown as SignInLimits;
  const ctx = buildContext(
    { config, log, nc, db: absent<Kysely<GatewayDB>>('db') },
    {
      call,
      asserter: undefined,
      tokens: new TokenVerifier(nc, {
        issuer: config.JWT_ISSUER,
        audience: config.JWT_AUDIENCE,
        timeoutMs: config.NATS_REQUEST_TIMEOUT_MS,
        log,
        refreshMs: config.JWKS_REFRESH_SECONDS * 1000,
        pinned: config.AUTH_JWT_PUBLIC_KEYS!,
        now: clock.now,
      }),
      allowance: new Allowance(config.UNCOUNTED_REQUESTS_PER_MINUTE, clock.now),
      signInLimits,
      usage: absent('usage'),
      provisionerUsage: absent('provisionerUsage'),
      instanceEvents: absent('instanceEvents'),
      instanceDeletions: absent('instanceDeletions'),
      streamSlots: absent('streamSlots'),
      webhooks: absent('webhooks'),
      idempotency: absent('idempotency'),
      keyReload: absent('keyReload'),
      ...opts.overrides,
    },
  );
  const server = createServer(opts.routes ? buildApp(ctx, opts.routes(ctx)) : buildApp(ctx));
  server.on('clientError', answerClientError);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}/api`;

  return {
    baseUrl,
    port,
    ctx,
    clock,
    calls,
    signer: signer.privateKey,
    kid,
    token: (user = {}) => {
      const now = Math.floor(clock.now() / 1000);
      return new SignJWT({ wallet: user.wallet_address ?? WALLET })
        .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'at+jwt' })
        .setIssuer(config.JWT_ISSUER)
        .setAudience(config.JWT_AUDIENCE)
        .setSubject(user.user_id ?? randomUUID())
        .setIssuedAt(now)
        .setExpirationTime(now + 3600)
        .setJti(randomUUID())
        .sign(signer.privateKey);
    },
    send: (method, path, body, headers = {}) => fetch(`${baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body }) }),
    raw: (request) =>
      new Promise((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.end(request));
        let data = '';
        socket.on('data', (d) => (data += d.toString()));
        socket.on('end', () => resolve(data));
        socket.on('error', reject);
      }),
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
