import { z } from 'zod';
import { contract, event, userContract } from './contract.ts';
import { walletAddress, isoTime, tierName, uuid } from './common.ts';

/** billing-chain's view of one wallet's subscription (its cache of the on-chain record). */
export const subscription = z.object({
  wallet_address: walletAddress,
  tier: tierName,
  is_active: z.boolean(),
  expires_at: isoTime,
  /** A cancel instruction succeeded: access continues until expires_at, no new instances. */
  cancelled: z.boolean(),
  /** When billing-chain last read it from the chain. */
  refreshed_at: isoTime,
});
export type Subscription = z.infer<typeof subscription>;

const who = z.object({ user_id: uuid, wallet_address: walletAddress });

export const register = userContract(
  'billing.v1.subscription.register',
  // Only types are checked here: billing-chain refuses a malformed signature (TX_SIGNATURE_MALFORMED)
  // or a tier other than 0/1/2 (INVALID_TIER) with their own codes.
  who.extend({
    tx_signature: z.string().max(200),
    tier: z.number(),
  }),
  z.object({
    success: z.boolean(),
    // Spec §4.4 fields, plus `cancelled` so the gateway can cache the whole view at once.
    subscription: z.object({ tier: tierName, is_active: z.boolean(), expires_at: isoTime, cancelled: z.boolean() }),
    tx_verified: z.boolean(),
  }),
);

/**
 * POST /subscription/register as a client sends it (the gateway adds who from the token). What the document promises:
 * a base58 64-byte signature (64-88 characters) and a tier id. The gateway and billing-chain check these themselves
 * and refuse with their own codes (TX_SIGNATURE_MALFORMED, INVALID_TIER), so this schema only documents them.
 */
export const registerBody = z.object({
  tx_signature: z
    .string()
    .regex(/^[1-9A-HJ-NP-Za-km-z]{64,88}$/)
    .describe('the confirmed subscribe transaction, base58'),
  tier: z.union([z.literal(0), z.literal(1), z.literal(2)]).describe('0 free, 1 pro, 2 enterprise: the tier the transaction subscribed to'),
});

/**
 * The cached subscription (refreshed from the chain when older than the TTL). 404 SUBSCRIPTION_NOT_FOUND when none.
 * A wallet's subscription is public on the chain, so the provisioner may read it without an assertion; only an
 * asserted user_id is recorded as the wallet's user.
 */
export const status = contract('billing.v1.subscription.status', who, subscription, { assertion: 'optional', read: true });

/** Force a refresh from the chain. */
export const refresh = userContract('billing.v1.subscription.refresh', who, subscription);

export const subscriptionChanged = event(
  'events.subscription.changed',
  subscription.extend({
    reason: z.enum(['registered', 'refreshed', 'renewed', 'expired', 'cancelled', 'picked_up']),
    /** The wallet's user when billing-chain knows it (a user registered or asked for it): webhooks go to that user. */
    user_id: uuid.nullish(),
  }),
);

/** A subscription that ends within 3 days and will not renew by itself as things stand (once per expires_at). */
export const subscriptionExpiring = event('events.subscription.expiring', subscription.extend({ user_id: uuid.nullish(), days_left: z.number().int() }));
