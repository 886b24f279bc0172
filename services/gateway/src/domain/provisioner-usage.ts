import { LRUCache } from 'lru-cache';
import type { NatsConnection, Subscription as NatsSubscription } from 'nats';
import { AppError, contracts, listen, type Listened, type Logger } from '@agenthost/shared';
import type { z } from 'zod';
import type { Call } from './call.ts';

export type ProvisionerUsageView = z.output<typeof contracts.provisioner.usage.output>;

const ZERO: ProvisionerUsageView = { instances_active: 0, storage_used_mb: 0, restarts: 0, oom_kills: 0, cpu_usage_percent: 0, memory_usage_mb: 0 };

/**
 * Instances and storage per user from the provisioner (provisioner.v1.usage.get), for the status
 * view and /usage/metrics. Answers are reused for a short time (instance create/delete events drop
 * them at once); while the provisioner cannot answer, 0 is reported (logged at most every 30 s) and
 * it is not asked again for a few seconds, so its absence costs no round trip per request.
 */
export class ProvisionerUsage {
  private readonly call: Call;
  private readonly log: Logger;
  /** Fresh for ttlMs; a stale answer is kept (bounded) to report while the provisioner cannot answer. */
  private readonly cache: LRUCache<string, ProvisionerUsageView, string | undefined>;
  private unavailableUntil = 0;
  private lastWarning = 0;
  private subs: NatsSubscription[] = [];

  constructor(call: Call, log: Logger, opts: { ttlMs?: number } = {}) {
    this.call = call;
    this.log = log;
    this.cache = new LRUCache<string, ProvisionerUsageView, string | undefined>({
      max: 50_000,
      ttl: opts.ttlMs ?? 2000,
      noDeleteOnStaleGet: true,
      noDeleteOnFetchRejection: true,
      // One question per user at a time, however many of their requests want the answer.
      fetchMethod: (userId, _stale, { context }) => this.call(contracts.provisioner.usage, { user_id: userId }, context),
    });
  }

  start(nc: NatsConnection): void {
    const changes: Listened<{ user_id: string }>[] = [contracts.provisioner.instanceCreated, contracts.provisioner.instanceDeleted];
    for (const ev of changes) {
      this.subs.push(listen(nc, ev, (p) => this.cache.delete(p.user_id), this.log));
    }
  }

  stop(): void {
    for (const s of this.subs) s.unsubscribe();
  }

  forget(userId: string): void {
    this.cache.delete(userId);
  }

  async get(userId: string, requestId?: string): Promise<ProvisionerUsageView> {
    if (Date.now() < this.unavailableUntil) return this.lastKnown(userId);
    try {
      return (await this.cache.fetch(userId, { context: requestId })) ?? ZERO;
    } catch (err) {
      if (err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE') this.unavailableUntil = Date.now() + 5000;
      if (Date.now() - this.lastWarning > 30_000) {
        this.lastWarning = Date.now();
        this.log.warn(
          { code: err instanceof AppError ? err.code : 'INTERNAL' },
          'provisioner usage unavailable: reporting the last known (or 0) instances and storage',
        );
      }
      return this.lastKnown(userId);
    }
  }

  private lastKnown(userId: string): ProvisionerUsageView {
    return this.cache.get(userId, { allowStale: true }) ?? ZERO;
  }
}
