import { LRUCache } from 'lru-cache';
import type { NatsConnection, Subscription as NatsSubscription } from 'nats';
import { AppError, contracts, listen, retry, type Logger } from '@agenthost/shared';
import type { Call } from './call.ts';
import { observeEntitlement } from './metrics.ts';

export type Subscription = contracts.billing.Subscription;

/** A subscription grants access while active and not past expires_at (a cancelled one until expires_at). */
export const isEntitled = (s: Subscription | null, now = Date.now()): s is Subscription => !!s && s.is_active && Date.parse(s.expires_at) > now;

export interface EntitlementOptions {
  /** How long a looked-up subscription (or its absence) is reused without asking billing-chain. */
  ttlMs: number;
  /** If billing-chain cannot be reached, a cached entry up to this old is still used (logged). */
  staleGraceMs?: number;
  /**
   * With nothing cached and no billing-chain replica running (one restarting), the lookup waits up to this
   * long for one to come back instead of failing the request (the request stays in flight meanwhile).
   */
  restartWaitMs?: number;
  log?: Logger;
  now?: () => number;
}

interface Entry {
  sub: Subscription | null;
  /** When billing-chain gave this answer (ms): a stale entry is served on its failure only within staleGraceMs of it. */
  at: number;
}

interface Lookup {
  user: { user_id: string; wallet_address: string };
  requestId: string | undefined;
}

/**
 * The caller's subscription as billing-chain knows it (null when there is none), cached per wallet
 * in memory for a short TTL so an authenticated request costs no round trip. Entries are replaced
 * by every events.subscription.changed (any replica of billing-chain publishes it; every gateway
 * replica listens with its own ephemeral subscription) and by register/refresh through this gateway.
 * lru-cache's fetch() gives one lookup per wallet at a time, and drops the answer of a lookup that was in
 * flight while the entry was set or deleted (ignoreFetchAbort: the caller still gets it, the cache does not),
 * so an older answer never overwrites a change.
 */
export class Entitlements {
  private readonly call: Call;
  private readonly opts: EntitlementOptions;
  private readonly cache: LRUCache<string, Entry, Lookup>;
  private sub: NatsSubscription | undefined;
  private lastStaleLog = 0;

  constructor(call: Call, opts: EntitlementOptions = { ttlMs: 5000 }) {
    this.call = call;
    this.opts = opts;
    this.cache = new LRUCache<string, Entry, Lookup>({
      max: 100_000,
      ttl: Math.max(1, opts.ttlMs),
      ignoreFetchAbort: true,
      // A lookup that failed keeps the entry it was refreshing (the next request retries).
      noDeleteOnFetchRejection: true,
      fetchMethod: (_wallet, stale, { context }) => this.revalidate(context, stale),
    });
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  async lookup(user: { user_id: string; wallet_address: string }, requestId?: string): Promise<Subscription | null> {
    // Just past the TTL (up to twice it): answer from the cache while one lookup refreshes it (no request waits).
    const remaining = this.cache.getRemainingTTL(user.wallet_address);
    const pastTtl = -remaining;
    const allowStale = pastTtl >= 0 && pastTtl < this.opts.ttlMs;
    observeEntitlement(remaining > 0 ? 'hit' : remaining < 0 && allowStale ? 'stale' : 'miss');
    const entry = await this.cache.fetch(user.wallet_address, { allowStale, context: { user, requestId } });
    return entry!.sub;
  }

  private async revalidate({ user, requestId }: Lookup, stale: Entry | undefined): Promise<Entry> {
    try {
      return { sub: await this.fetch(user, requestId, stale !== undefined), at: this.now() };
    } catch (err) {
      const grace = this.opts.staleGraceMs ?? 60_000;
      if (stale && err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE' && this.now() - stale.at < grace) {
        if (this.now() - this.lastStaleLog > 10_000) {
          this.lastStaleLog = this.now();
          this.opts.log?.warn({ code: err.code }, 'billing-chain unavailable: using cached subscriptions past their TTL');
        }
        return stale;
      }
      throw err;
    }
  }

  private async fetch(user: { user_id: string; wallet_address: string }, requestId: string | undefined, cached: boolean): Promise<Subscription | null> {
    const ask = async () => {
      try {
        return await this.call(contracts.billing.status, { user_id: user.user_id, wallet_address: user.wallet_address }, requestId);
      } catch (err) {
        if (err instanceof AppError && err.code === 'SUBSCRIPTION_NOT_FOUND') return null;
        throw err;
      }
    };
    // billing-chain restarting (no replica answers) is waited out for a moment; any other failure is thrown.
    const restarting = (err: unknown) => err instanceof AppError && err.details?.notRunning === true;
    return retry(ask, { delayMs: 250, until: this.now() + (cached ? 0 : (this.opts.restartWaitMs ?? 0)), retryable: restarting, now: () => this.now() });
  }

  /** A fresher view than any in flight (a register/refresh answer from billing-chain). */
  set(wallet: string, sub: Subscription | null): void {
    this.cache.set(wallet, { sub, at: this.now() });
  }

  /** Forget what is known of a wallet (a subscription event): its next request asks billing-chain. */
  invalidate(wallet: string): void {
    this.cache.delete(wallet);
  }

  /**
   * Listen to events.subscription.changed on this connection (to drop the wallet's entry; the record is
   * re-read from billing-chain). A core subscription sees every event
   * JetStream stores (they are ordinary publishes), costs no consumer state on the server, and
   * needs no cleanup per replica; an event missed during a disconnect is covered by the TTL, and the
   * whole cache is dropped on reconnect to be safe.
   */
  start(nc: NatsConnection): void {
    // A hint only: what the event says is never taken as a grant. The wallet's entry is dropped and
    // its next request asks billing-chain, the owner of the record.
    this.sub = listen(nc, contracts.billing.subscriptionChanged, (ev) => this.invalidate(ev.wallet_address), this.opts.log);
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'reconnect') this.clear();
      }
    })().catch(() => {});
  }

  clear(): void {
    this.cache.clear();
  }

  stop(): void {
    this.sub?.unsubscribe();
  }
}
