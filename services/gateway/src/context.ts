import type { Kysely } from 'kysely';
import type { NatsConnection } from 'nats';
import type { KeyObject } from 'node:crypto';
import { AssertionSigner, contracts, request, x25519PublicKey, type Logger } from '@agenthost/shared';
import { SignInLimits } from './domain/sign-in-limits.ts';
import type { GatewayConfig } from './config.ts';
import type { GatewayDB } from './db/schema.ts';
import { coalesce, type Call } from './domain/call.ts';
import { Entitlements } from './domain/entitlement.ts';
import { gatewayDataKey } from './domain/data-key.ts';
import { IdempotencyStore } from './domain/idempotency.ts';
import { InstanceDeletions } from './domain/instance-deletions.ts';
import { InstanceEvents } from './domain/instance-events.ts';
import { KeyReload } from './domain/key-reload.ts';
import { ProvisionerUsage } from './domain/provisioner-usage.ts';
import { Allowance } from './domain/quota/allowance.ts';
import { Usage } from './domain/quota/policy.ts';
import { StreamReader } from './domain/stream-reader.ts';
import { LastAnswers } from './domain/last-answers.ts';
import { StreamSlots } from './domain/stream-slots.ts';
import { TokenVerifier } from './domain/tokens.ts';
import { Webhooks } from './domain/webhooks/index.ts';

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
  /** Instances and storage per user from the provisioner (briefly cached). */
  provisionerUsage: ProvisionerUsage;
  /** Hands key changes to running instances and waits for their reload. */
  keyReload: KeyReload;
  /** Status changes and deletions of instances, from one subscription per replica (wait, the event stream). */
  instanceEvents: InstanceEvents;
  /** Deletions the event stream holds, by instance id (a resume of a deleted instance's events). */
  instanceDeletions: InstanceDeletions;
  /** The caps on open event streams, log follows and key watches, shared by every replica. */
  streamSlots: StreamSlots;
  /** Outbound webhooks: endpoints, the fan-out of events into deliveries, the sender (started by main). */
  webhooks: Webhooks;
  /** The last answers of the reads served while their backend is unavailable (Route.lastKnown). */
  lastAnswers: LastAnswers;
  /** The answers kept per user and Idempotency-Key. */
  idempotency: IdempotencyStore;
  /** Forward a call to a backend over NATS with the gateway's timeout and the request id (and an assertion for a user's call). */
  call: Call;
  /** Signs the assertion of each call that acts for a user (none with ASSERTIONS=off, for benchmarks). */
  asserter: AssertionSigner | undefined;
  /** keyvault's public key: provider keys are sealed to it before they reach the bus. */
  keyvaultSealKey: KeyObject;
}

/**
 * Wires the gateway's parts from its config and connections. A test passes `overrides` to swap one part (a clock-driven
 * Usage, say) and keeps the rest real; an overridden part is not built at all.
 */
export function buildContext(
  deps: { config: GatewayConfig; log: Logger; nc: NatsConnection; db: Kysely<GatewayDB> },
  overrides: Partial<GatewayContext> = {},
): GatewayContext {
  const { config, log, nc, db } = deps;
  const asserter =
    'asserter' in overrides ? overrides.asserter : config.ASSERTIONS === 'on' ? new AssertionSigner(config.GATEWAY_ASSERTION_PRIVATE_KEY!) : undefined;
  const call: Call = overrides.call ?? ((c, input, requestId) => request(nc, c, input, { timeoutMs: config.NATS_REQUEST_TIMEOUT_MS, requestId, asserter }));
  const provisionerUsage = overrides.provisionerUsage ?? new ProvisionerUsage(call, log);
  if (!overrides.provisionerUsage) provisionerUsage.start(nc);
  const instanceEvents = overrides.instanceEvents ?? new InstanceEvents(log);
  if (!overrides.instanceEvents) instanceEvents.start(nc);
  const streamSlots = overrides.streamSlots ?? new StreamSlots(db, { perUser: config.STREAMS_PER_USER, perInstance: config.STREAMS_PER_INSTANCE }, log);
  if (!overrides.streamSlots) streamSlots.start();
  return {
    ...deps,
    call,
    asserter,
    signInLimits: overrides.signInLimits ?? new SignInLimits(db, config),
    provisionerUsage,
    instanceEvents,
    instanceDeletions: overrides.instanceDeletions ?? new InstanceDeletions(db, new StreamReader(nc, config.NATS_REQUEST_TIMEOUT_MS)),
    streamSlots,
    webhooks: overrides.webhooks ?? new Webhooks(db, config, log),
    lastAnswers: overrides.lastAnswers ?? new LastAnswers({ maxAgeMs: config.OUTAGE_SERVE_SECONDS * 1000 }),
    idempotency: overrides.idempotency ?? new IdempotencyStore(db, config.IDEMPOTENCY_TTL_HOURS * 3600_000, gatewayDataKey(config)),
    keyvaultSealKey: overrides.keyvaultSealKey ?? x25519PublicKey(config.KEYVAULT_SEAL_PUBLIC_KEY),
    tokens:
      overrides.tokens ??
      new TokenVerifier(nc, {
        issuer: config.JWT_ISSUER,
        audience: config.JWT_AUDIENCE,
        timeoutMs: config.NATS_REQUEST_TIMEOUT_MS,
        log,
        refreshMs: config.JWKS_REFRESH_SECONDS * 1000,
        ...(config.AUTH_JWT_PUBLIC_KEYS ? { pinned: config.AUTH_JWT_PUBLIC_KEYS } : {}),
      }),
    entitlements:
      overrides.entitlements ??
      new Entitlements(coalesce(call), {
        ttlMs: config.ENTITLEMENT_CACHE_TTL_MS,
        restartWaitMs: config.ENTITLEMENT_RESTART_WAIT_MS,
        staleGraceMs: config.OUTAGE_SERVE_SECONDS * 1000,
        log,
      }),
    usage:
      overrides.usage ??
      new Usage(db, config.TIER_LIMITS_JSON, {
        nc,
        log,
        prefetchMax: config.USAGE_PREFETCH_MAX,
        idleReturnMs: config.USAGE_IDLE_RETURN_MS,
        leaseTtlMs: config.USAGE_LEASE_TTL_SECONDS * 1000,
        offlineMs: config.OUTAGE_SERVE_SECONDS * 1000,
      }),
    allowance: overrides.allowance ?? new Allowance(config.UNCOUNTED_REQUESTS_PER_MINUTE),
    keyReload:
      overrides.keyReload ??
      new KeyReload(
        nc,
        log,
        config.KEYS_APPLY_WAIT_MS,
        async (user_id, instance_id) => (await call(contracts.provisioner.get, { user_id, instance_id })).status,
      ),
  };
}
