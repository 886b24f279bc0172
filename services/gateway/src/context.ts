import type { Kysely } from 'kysely';
import type { NatsConnection } from 'nats';
import type { KeyObject } from 'node:crypto';
import { AssertionSigner, contracts, request, x25519PublicKey, type Contract, type Logger } from '@agenthost/shared';
import type { z } from 'zod';
import { TokenVerifier } from './auth/jwt.ts';
import { SignInLimits } from './auth/sign-in-limits.ts';
import type { GatewayConfig } from './config.ts';
import type { GatewayDB } from './db/schema.ts';
import { coalesce } from './coalesce.ts';
import { Allowance } from './quota/allowance.ts';
import { Entitlements } from './entitlement.ts';
import { KeyReload } from './key-reload.ts';
import { ApiCatalog } from './openapi.ts';
import { ProvisionerUsage } from './provisioner-usage.ts';
import { Usage } from './usage.ts';

/** A call to a backend over NATS (the gateway's timeout and request id applied). */
export type Call = <C extends Contract>(c: C, input: z.input<C['input']>, requestId?: string) => Promise<z.output<C['output']>>;

/** The composition root: everything the routes need. Tests build it with overrides. */
export interface GatewayContext {
  config: GatewayConfig;
  log: Logger;
  nc: NatsConnection;
  db: Kysely<GatewayDB>;
  tokens: TokenVerifier;
  entitlements: Entitlements;
  usage: Usage;
  /** Requests per minute of callers the tier does not count (no subscription; registrations). */
  allowance: Allowance;
  /** Nonces and logins per client address and per wallet, shared by every replica. */
  signInLimits: SignInLimits;
  /** Every route, for GET /api/openapi.json. */
  catalog: ApiCatalog;
  /** Instances and storage per user from the provisioner (briefly cached). */
  provisionerUsage: ProvisionerUsage;
  /** Hands key changes to running instances and waits for their reload. */
  keyReload: KeyReload;
  /** Forward a call to a backend over NATS with the gateway's timeout and the request id (and an assertion for a user's call). */
  call: Call;
  /** Signs the assertion of each call that acts for a user (none with ASSERTIONS=off, for benchmarks). */
  asserter: AssertionSigner | undefined;
  /** keyvault's public key: provider keys are sealed to it before they reach the bus. */
  keyvaultSealKey: KeyObject;
}

export function buildContext(deps: { config: GatewayConfig; log: Logger; nc: NatsConnection; db: Kysely<GatewayDB> }): GatewayContext {
  const { config, log, nc, db } = deps;
  const asserter = config.ASSERTIONS === 'on' ? new AssertionSigner(config.GATEWAY_ASSERTION_PRIVATE_KEY!) : undefined;
  const call: Call = (c, input, requestId) => request(nc, c, input, { timeoutMs: config.NATS_REQUEST_TIMEOUT_MS, requestId, asserter });
  const provisionerUsage = new ProvisionerUsage(call, log);
  provisionerUsage.start(nc);
  return {
    ...deps,
    call,
    asserter,
    keyvaultSealKey: x25519PublicKey(config.KEYVAULT_SEAL_PUBLIC_KEY),
    signInLimits: new SignInLimits(db, config),
    tokens: new TokenVerifier(nc, {
      issuer: config.JWT_ISSUER,
      audience: config.JWT_AUDIENCE,
      timeoutMs: config.NATS_REQUEST_TIMEOUT_MS,
      log,
      refreshMs: config.JWKS_REFRESH_SECONDS * 1000,
      ...(config.AUTH_JWT_PUBLIC_KEYS ? { pinned: config.AUTH_JWT_PUBLIC_KEYS } : {}),
    }),
    entitlements: new Entitlements(coalesce(call), { ttlMs: config.ENTITLEMENT_CACHE_TTL_MS, restartWaitMs: config.ENTITLEMENT_RESTART_WAIT_MS, log }),
    usage: new Usage(db, config.TIER_LIMITS_JSON, { nc, log, prefetchMax: config.USAGE_PREFETCH_MAX, idleReturnMs: config.USAGE_IDLE_RETURN_MS, leaseTtlMs: config.USAGE_LEASE_TTL_SECONDS * 1000 }),
    allowance: new Allowance(config.UNCOUNTED_REQUESTS_PER_MINUTE),
    catalog: new ApiCatalog(),
    provisionerUsage,
    keyReload: new KeyReload(nc, log, config.KEYS_APPLY_WAIT_MS, async (user_id, instance_id) => (await call(contracts.provisioner.get, { user_id, instance_id })).status === 'running'),
  };
}
