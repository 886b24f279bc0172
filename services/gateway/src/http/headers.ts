import type { Response } from 'express';
import { remaining } from '@agenthost/shared';
import type { GatewayContext } from '../context.ts';
import { isEntitled, type Subscription } from '../domain/entitlement.ts';

/** X-Subscription-Tier / -Expires / X-Usage-Remaining on every response; "none" when the caller has no subscription. */
export function setSubscriptionHeaders(res: Response, sub: Subscription | null, remainingToday: number | undefined): void {
  res.setHeader('X-Subscription-Tier', sub ? sub.tier : 'none');
  res.setHeader('X-Subscription-Expires', sub ? sub.expires_at : 'none');
  res.setHeader('X-Usage-Remaining', String(remainingToday ?? 0));
}

/** The headers for a caller whose request was not counted: remaining = the tier's daily limit minus today's count. */
export async function headersFor(ctx: GatewayContext, res: Response, userId: string, sub: Subscription | null): Promise<void> {
  if (!isEntitled(sub)) return setSubscriptionHeaders(res, null, undefined);
  setSubscriptionHeaders(res, sub, remaining(ctx.config.TIER_LIMITS_JSON[sub.tier].requests_per_day, await ctx.usage.requestsToday(userId)));
}
