import type { NatsConnection, Subscription } from 'nats';
import { contracts, safeDecode } from '@agenthost/shared';

const P = contracts.provisioner;

/**
 * Wakes a user's live event streams (GET /webhooks/events) when the bus says something happened to the user: one
 * core subscription per subject for the replica, made at the first stream, fanned out by user id. Core delivery is
 * a hint only (the streams read what to send from JetStream); the subjects are those the gateway may already
 * subscribe to, so the events it cannot hear this way (keys.changed, subscription.expiring) wait for a stream's
 * quiet re-read.
 */
export class UserWake {
  private readonly listeners = new Map<string, Set<() => void>>();
  private subs: Subscription[] | undefined;
  private readonly nc: NatsConnection;

  constructor(nc: NatsConnection) {
    this.nc = nc;
  }

  /** Calls `wake` for each hint about the user from now on; returns the function that stops it. */
  watch(userId: string, wake: () => void): () => void {
    this.subs ??= [P.instanceCreated, P.instanceStatusChanged, P.instanceDeleted, contracts.billing.subscriptionChanged].map((c) =>
      this.nc.subscribe(c.subject, { callback: (_e, m) => this.emit(safeDecode(m.data)) }),
    );
    const set = this.listeners.get(userId) ?? new Set();
    set.add(wake);
    this.listeners.set(userId, set);
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.listeners.get(userId) === set) this.listeners.delete(userId);
    };
  }

  private emit(payload: unknown): void {
    const user = payload && typeof payload === 'object' ? (payload as { user_id?: unknown }).user_id : undefined;
    if (typeof user === 'string') for (const wake of this.listeners.get(user) ?? []) wake();
  }
}
