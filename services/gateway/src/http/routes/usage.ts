import { contracts, remaining } from '@agenthost/shared';
import type { GatewayContext } from '../../context.ts';
import type { Route } from '../route.ts';

/** GET /usage/metrics (spec §4.6): the daily period's requests, instances and storage against the tier (-1 = unlimited). */
export const usageRoutes = (ctx: GatewayContext): Route[] => [
  {
    method: 'get',
    path: '/usage/metrics',
    access: 'subscriber',
    operationId: 'getUsage',
    summary: "Today's requests, instances and storage against the tier's limits",
    response: contracts.api.usageMetrics,
    handler: async ({ caller, requestId }) => {
      const sub = caller.subscription!;
      const limits = ctx.config.TIER_LIMITS_JSON[sub.tier];
      const [prov, used] = await Promise.all([ctx.provisionerUsage.get(caller.user_id, requestId), ctx.usage.requestsToday(caller.user_id)]);
      return {
        period: 'daily',
        tier: sub.tier,
        requests: { used, limit: limits.requests_per_day, remaining: remaining(limits.requests_per_day, used), reset_at: ctx.usage.resetAt().toISOString() },
        instances: {
          active: prov.instances_active,
          limit: limits.instances,
          remaining: remaining(limits.instances, prov.instances_active),
          restarts: prov.restarts,
          oom_kills: prov.oom_kills,
          cpu_usage_percent: prov.cpu_usage_percent,
          memory_usage_mb: prov.memory_usage_mb,
        },
        storage: { used_mb: prov.storage_used_mb, limit_mb: limits.storage_mb, remaining_mb: remaining(limits.storage_mb, prov.storage_used_mb) },
      };
    },
  },
];
