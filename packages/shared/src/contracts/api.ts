import { z } from 'zod';
import { isoTime, tierName, uuid, walletAddress } from './common.ts';

// Views the gateway composes itself (from several services); the OpenAPI document describes them.

/** GET /subscription/status (spec §2.1 API view). -1 = unlimited. */
export const statusView = z.object({
  wallet_address: walletAddress,
  tier: tierName,
  is_active: z.boolean(),
  expires_at: isoTime,
  cancelled: z.boolean(),
  instances_used: z.number(),
  instances_limit: z.number(),
  requests_today: z.number(),
  requests_limit: z.number(),
  storage_used_mb: z.number(),
  storage_limit_mb: z.number(),
});

/** GET /usage/metrics (spec §4.6). -1 = unlimited. */
export const usageMetrics = z.object({
  period: z.literal('daily'),
  tier: tierName,
  requests: z.object({ used: z.number(), limit: z.number(), remaining: z.number(), reset_at: isoTime }),
  /** Also, over the user's instances: restarts after crashes and OOM kills so far, live CPU % and memory of the running ones. */
  instances: z.object({
    active: z.number(),
    limit: z.number(),
    remaining: z.number(),
    restarts: z.number(),
    oom_kills: z.number(),
    cpu_usage_percent: z.number(),
    memory_usage_mb: z.number(),
  }),
  storage: z.object({ used_mb: z.number(), limit_mb: z.number(), remaining_mb: z.number() }),
});

/** Every error response. */
export const errorBody = z.object({ error: z.string(), code: z.string(), status: z.number().int() });

export const whoAmI = z.object({ user_id: uuid, wallet_address: walletAddress });
