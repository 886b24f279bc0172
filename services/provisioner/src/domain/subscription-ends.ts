import type { NatsConnection } from 'nats';
import { consumeEvents, contracts, type Logger, request, type Subscription } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceReads } from './instance-reads.ts';

interface Deps {
  nc: NatsConnection;
  repo: Pick<InstanceReads, 'ownerOfWallet'>;
  config: ProvisionerConfig;
  log: Logger;
  /** Stops every instance of the wallet; resolves to how many were running. */
  suspendWallet(wallet: string): Promise<number>;
}

/**
 * Stops a wallet's instances when its subscription ends. A durable consumer shared by every replica: a subscription
 * that ended while we were down still stops its instances when we are back. A throw (Docker down) redelivers the event.
 */
export function stopEndedSubscriptions(deps: Deps): Promise<Subscription> {
  return consumeEvents(
    deps.nc,
    contracts.billing.subscriptionChanged,
    'provisioner-subscription-changes',
    async (sub) => {
      if (sub.is_active) return;
      // Re-read from billing-chain, the owner of the record: an event alone never stops anything.
      if (!(await subscriptionEnded(deps, sub.wallet_address))) {
        deps.log.warn({ wallet_address: sub.wallet_address, reason: sub.reason }, 'subscription event not confirmed by billing-chain: ignored');
        return;
      }
      const stopped = await deps.suspendWallet(sub.wallet_address);
      if (stopped) deps.log.info({ wallet_address: sub.wallet_address, stopped, reason: sub.reason }, 'subscription ended: instances stopped');
    },
    deps.log,
  );
}

/** True when billing-chain says the wallet has no active, unexpired subscription (a throw redelivers the event). */
async function subscriptionEnded(deps: Deps, wallet: string): Promise<boolean> {
  const owner = await deps.repo.ownerOfWallet(wallet);
  if (!owner) return false; // nothing of this wallet's to stop
  try {
    const s = await request(deps.nc, contracts.billing.status, { user_id: owner, wallet_address: wallet }, { timeoutMs: deps.config.NATS_REQUEST_TIMEOUT_MS });
    return !s.is_active || Date.parse(s.expires_at) <= Date.now();
  } catch (err) {
    if ((err as { code?: string }).code === 'SUBSCRIPTION_NOT_FOUND') return true;
    throw err;
  }
}
