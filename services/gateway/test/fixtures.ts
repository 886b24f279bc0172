import type { contracts } from '@agenthost/shared';

/** An active subscription of a tier, valid for a day, as billing-chain answers it. */
export const activeSubscription = (tier: contracts.TierName): contracts.billing.Subscription => ({
  wallet_address: 'x',
  tier,
  is_active: true,
  expires_at: new Date(Date.now() + 86_400_000).toISOString(),
  cancelled: false,
  refreshed_at: new Date().toISOString(),
});
