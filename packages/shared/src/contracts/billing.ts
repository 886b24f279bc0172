import { z } from 'zod';
import { contract, event } from './contract.ts';
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

export const register = contract(
  'billing.v1.subscription.register',
  who.extend({
    tx_signature: z.string().regex(/^[1-9A-HJ-NP-Za-km-z]{64,90}$/, 'must be a base58 transaction signature'),
    tier: z.number().int().min(0).max(2),
  }),
  z.object({
    success: z.boolean(),
    subscription: z.object({ tier: tierName, is_active: z.boolean(), expires_at: isoTime }),
    tx_verified: z.boolean(),
  }),
);

/** The cached subscription (refreshed from the chain when older than the TTL). 404 SUBSCRIPTION_NOT_FOUND when none. */
export const status = contract('billing.v1.subscription.status', who, subscription);

/** Force a refresh from the chain. */
export const refresh = contract('billing.v1.subscription.refresh', who, subscription);

export const subscriptionChanged = event(
  'events.subscription.changed',
  subscription.extend({ reason: z.enum(['registered', 'refreshed', 'renewed', 'expired', 'cancelled', 'picked_up']) }),
);
