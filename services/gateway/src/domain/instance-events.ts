import type { NatsConnection, Subscription } from 'nats';
import { contracts, listen, type Logger } from '@agenthost/shared';

const P = contracts.provisioner;

/** A status change or a deletion of one instance, as the provisioner published it. */
export type InstanceEvent =
  | { kind: 'status'; status: contracts.provisioner.InstanceView['status']; at: string; failure_reason?: string }
  | { kind: 'deleted'; at: string }
  /** The bus reconnected: events may have been missed while it was down, so listeners read the state again. */
  | { kind: 'recheck' };

type Listener = (ev: InstanceEvent) => void;

/**
 * One core subscription per replica to every instance's status changes and deletions, fanned out in memory to the
 * waiters of each instance id. One subscription, not one per waiter: a thousand open waits cost the bus nothing more.
 * Core delivery carries no stream sequence, so this only wakes listeners; the event stream (GET /instance/events)
 * reads what to send from JetStream itself.
 */
export class InstanceEvents {
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly subs: Subscription[] = [];
  private readonly streams = new Set<() => void>();

  private readonly log: Logger;

  constructor(log: Logger) {
    this.log = log;
  }

  start(nc: NatsConnection): void {
    void this.recheckAfterReconnects(nc).catch((err: unknown) => this.log.warn({ err }, 'bus status watch ended'));
    this.subs.push(
      listen(
        nc,
        P.instanceStatusChanged,
        ({ instance_id, status, at, failure_reason }) => this.emit(instance_id, { kind: 'status', status, at, ...(failure_reason ? { failure_reason } : {}) }),
        this.log,
      ),
      listen(nc, P.instanceDeleted, (p) => this.emit(p.instance_id, { kind: 'deleted', at: p.deleted_at }), this.log),
    );
  }

  private async recheckAfterReconnects(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type !== 'reconnect') continue;
      for (const id of [...this.listeners.keys()]) this.emit(id, { kind: 'recheck' });
    }
  }

  /** Ends every open client stream too (at shutdown), so their clients resume on another replica. */
  stop(): void {
    for (const s of this.subs) s.unsubscribe();
    for (const end of this.streams) end();
  }

  /** Registers a client stream to end at stop(); returns the function that forgets it. */
  hold(end: () => void): () => void {
    this.streams.add(end);
    return () => void this.streams.delete(end);
  }

  /** Calls `listener` for each event of the instance from now on; returns the function that stops it. */
  watch(instanceId: string, listener: Listener): () => void {
    let set = this.listeners.get(instanceId);
    if (!set) this.listeners.set(instanceId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(instanceId) === set) this.listeners.delete(instanceId);
    };
  }

  private emit(instanceId: string, ev: InstanceEvent): void {
    for (const l of this.listeners.get(instanceId) ?? []) {
      try {
        l(ev);
      } catch (err) {
        this.log.warn({ err }, 'instance event listener failed');
      }
    }
  }
}
