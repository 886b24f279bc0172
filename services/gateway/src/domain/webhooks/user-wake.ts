import type { NatsConnection, Subscription } from 'nats';
import { contracts, listen, type Listened, type Logger } from '@agenthost/shared';

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
  private readonly log: Logger;

  constructor(nc: NatsConnection, log: Logger) {
    this.nc = nc;
    this.log = log;
  }

  /** Calls `wake` for each hint about the user from now on; returns the function that stops it. */
  watch(userId: string, wake: () => void): () => void {
    const hints: Listened<{ user_id?: string | null }>[] = [
      P.instanceCreated,
      P.instanceStatusChanged,
      P.instanceDeleted,
      contracts.billing.subscriptionChanged,
    ];
    this.subs ??= hints.map((c) => listen(this.nc, c, (p) => this.emit(p.user_id), this.log));
    const set = this.listeners.get(userId) ?? new Set();
    set.add(wake);
    this.listeners.set(userId, set);
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.listeners.get(userId) === set) this.listeners.delete(userId);
    };
  }

  private emit(user: string | null | undefined): void {
    if (user) for (const wake of this.listeners.get(user) ?? []) wake();
  }
}
