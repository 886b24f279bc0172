import type { Kysely } from 'kysely';
import { remaining, type TierTable } from '@agenthost/shared';
import type { GatewayDB } from './db/schema.ts';
import type { Subscription } from './entitlement.ts';

export interface UsageDecision {
  /** Requests left today after this one (-1 = unlimited). */
  remainingToday: number;
}

/** Counts requests against the tier's daily and per-minute limits. */
export class Usage {
  readonly db: Kysely<GatewayDB>;
  readonly tiers: TierTable;
  constructor(db: Kysely<GatewayDB>, tiers: TierTable) {
    this.db = db;
    this.tiers = tiers;
  }

  async count(_userId: string, sub: Subscription): Promise<UsageDecision> {
    return { remainingToday: remaining(this.tiers[sub.tier].requests_per_day, 0) };
  }

  async stop(): Promise<void> {}
}
