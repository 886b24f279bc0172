import type { NatsConnection, Subscription as NatsSubscription } from 'nats';
import { AppError, contracts, decode, type Logger } from '@agenthost/shared';
import type { Call } from './context.ts';
import { observeEntitlement } from './metrics.ts';

export type Subscription = contracts.billing.Subscription;

/** A subscription grants access while active and not past expires_at (a cancelled one until expires_at). */
export const isEntitled = (s: Subscription | null, now = Date.now()): s is Subscription =>
  !!s && s.is_active && Date.parse(s.expires_at) > now;

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
  at: number;
}

/**
 * The caller's subscription as billing-chain knows it (null when there is none), cached per wallet
 * in memory for a short TTL so an authenticated request costs no round trip. Entries are replaced
 * by every events.subscription.changed (any replica of billing-chain publishes it; every gateway
 * replica listens with its own ephemeral subscription) and by register/refresh through this gateway.
 * A generation counter per wallet keeps a lookup that was in flight during a change from writing
 * the older answer back.
 */
export class Entitlements {
  private readonly call: Call;
  private readonly opts: EntitlementOptions;
  private readonly cache = new Map<string, Entry>();
  private readonly generation = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<Subscription | null>>();
  private sub: NatsSubscription | undefined;
  private lastStaleLog = 0;

  constructor(call: Call, opts: EntitlementOptions = { ttlMs: 5000 }) {
    this.call = call;
    this.opts = opts;
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  async lookup(user: { user_id: string; wallet_address: string }, requestId?: string): Promise<Subscription | null> {
    const wallet = user.wallet_address;
    const hit = this.cache.get(wallet);
    const age = hit ? this.now() - hit.at : Infinity;
    if (hit && age < this.opts.ttlMs) {
      observeEntitlement('hit');
      return hit.sub;
    }
    const running = this.inflight.get(wallet);
    // Just past the TTL: answer from the cache while one lookup refreshes it (no request waits).
    if (hit && age < 2 * this.opts.ttlMs) {
      observeEntitlement('stale');
      if (!running) void this.revalidate(user, hit, requestId).catch(() => {});
      return hit.sub;
    }
    observeEntitlement(running ? 'coalesced' : 'miss');
    if (running) return running;
    return this.revalidate(user, hit, requestId);
  }

  private revalidate(user: { user_id: string; wallet_address: string }, hit: Entry | undefined, requestId?: string): Promise<Subscription | null> {
    const wallet = user.wallet_address;
    const gen = this.generation.get(wallet) ?? 0;
    const p = (async () => {
      try {
        const sub = await this.fetch(user, requestId, hit);
        if ((this.generation.get(wallet) ?? 0) === gen) this.put(wallet, sub);
        return sub;
      } catch (err) {
        const grace = this.opts.staleGraceMs ?? 60_000;
        if (hit && err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE' && this.now() - hit.at < grace) {
          if (this.now() - this.lastStaleLog > 10_000) {
            this.lastStaleLog = this.now();
            this.opts.log?.warn({ code: err.code }, 'billing-chain unavailable: using cached subscriptions past their TTL');
          }
          return hit.sub;
        }
        throw err;
      } finally {
        this.inflight.delete(wallet);
      }
    })();
    this.inflight.set(wallet, p);
    return p;
  }

  private async fetch(user: { user_id: string; wallet_address: string }, requestId?: string, hit?: Entry): Promise<Subscription | null> {
    const until = this.now() + (hit ? 0 : (this.opts.restartWaitMs ?? 0));
    for (;;) {
      try {
        return await this.call(contracts.billing.status, { user_id: user.user_id, wallet_address: user.wallet_address }, requestId);
      } catch (err) {
        if (err instanceof AppError && err.code === 'SUBSCRIPTION_NOT_FOUND') return null;
        const restarting = err instanceof AppError && err.details?.notRunning === true;
        if (!restarting || this.now() >= until) throw err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  private put(wallet: string, sub: Subscription | null): void {
    if (this.cache.size >= 100_000) this.cache.delete(this.cache.keys().next().value!);
    if (this.generation.size >= 200_000 && this.inflight.size === 0) this.generation.clear();
    this.cache.set(wallet, { sub, at: this.now() });
  }

  /** A fresher view than any in flight (a register/refresh answer from billing-chain). */
  set(wallet: string, sub: Subscription | null): void {
    this.generation.set(wallet, (this.generation.get(wallet) ?? 0) + 1);
    this.put(wallet, sub);
  }

  /** Forget what is known of a wallet (a subscription event): its next request asks billing-chain. */
  invalidate(wallet: string): void {
    this.generation.set(wallet, (this.generation.get(wallet) ?? 0) + 1);
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
    const subject = contracts.billing.subscriptionChanged.subject;
    this.sub = nc.subscribe(subject, {
      callback: (_err, msg) => {
        let parsed;
        try {
          parsed = contracts.billing.subscriptionChanged.payload.safeParse(decode(msg.data));
        } catch {
          return;
        }
        if (!parsed.success) return;
        // A hint only: what the event says is never taken as a grant. The wallet's entry is dropped and
        // its next request asks billing-chain, the owner of the record.
        this.invalidate(parsed.data.wallet_address);
      },
    });
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'reconnect') this.clear();
      }
    })().catch(() => {});
  }

  clear(): void {
    for (const w of this.cache.keys()) this.generation.set(w, (this.generation.get(w) ?? 0) + 1);
    this.cache.clear();
  }

  stop(): void {
    this.sub?.unsubscribe();
  }
}
