import { children, counter } from '@agenthost/shared';

// The gateway's own metrics beyond HTTP (http/observe.ts) and NATS (packages/shared): no user or wallet labels.

const leases = counter('agenthost_quota_leases_total', 'Quota blocks this replica asked the shared counter for, by outcome (granted, exhausted, error)', [
  'outcome',
]);
const leasedTokens = counter('agenthost_quota_leased_requests_total', 'Requests of quota granted to this replica in blocks');
const leaseChild = children((outcome) => leases.labels(outcome!));

export function observeLease(outcome: 'granted' | 'exhausted' | 'error', granted = 0): void {
  leaseChild(outcome).inc();
  if (granted > 0) leasedTokens.inc(granted);
}

const entitlement = counter('agenthost_entitlement_cache_total', 'Subscription lookups, by how the cache answered (hit, stale, miss)', ['result']);
const entitlementChild = children((result) => entitlement.labels(result!));

export const observeEntitlement = (result: 'hit' | 'stale' | 'miss'): void => entitlementChild(result).inc();
