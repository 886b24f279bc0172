import { z } from 'zod';
import type { TierName } from './contracts/common.ts';

// Tier limits are configuration (TIER_LIMITS_JSON, merged over these defaults). The defaults are the
// status/API table of spec §8; -1 means unlimited. Instance resources per tier are our decision.

const limit = z.number().int().min(-1);
export const tierLimits = z.object({
  instances: limit,
  requests_per_day: limit,
  requests_per_minute: limit,
  storage_mb: limit,
  memory_mb: z.number().int().min(64),
  cpus: z.number().positive(),
  pids: z.number().int().min(16),
  /** Backups kept per instance (the oldest goes first); 0: no backups, scheduled or on request. */
  backups_kept: z.number().int().min(0),
});
export type TierLimits = z.infer<typeof tierLimits>;
export type TierTable = Record<TierName, TierLimits>;

export const UNLIMITED = -1;

export const DEFAULT_TIERS: TierTable = {
  free: { instances: 1, requests_per_day: 1000, requests_per_minute: 60, storage_mb: 100, memory_mb: 1536, cpus: 0.5, pids: 256, backups_kept: 1 },
  pro: { instances: 5, requests_per_day: 10000, requests_per_minute: 600, storage_mb: 1024, memory_mb: 2048, cpus: 1, pids: 512, backups_kept: 7 },
  enterprise: {
    instances: UNLIMITED,
    requests_per_day: UNLIMITED,
    requests_per_minute: UNLIMITED,
    storage_mb: 10240,
    memory_mb: 4096,
    cpus: 2,
    pids: 1024,
    backups_kept: 30,
  },
};

const override = z.partialRecord(z.enum(['free', 'pro', 'enterprise']), tierLimits.partial());

/** The tier table from TIER_LIMITS_JSON (partial per tier, merged over the defaults). */
export function parseTiers(json: string | undefined): TierTable {
  if (!json) return DEFAULT_TIERS;
  const parsed = override.parse(JSON.parse(json));
  const out = structuredClone(DEFAULT_TIERS);
  for (const [tier, limits] of Object.entries(parsed) as [TierName, Partial<TierLimits>][]) Object.assign(out[tier], limits);
  return out;
}

const fieldNames = Object.keys(tierLimits.shape).join(', ');
const backupsKept = Object.values(DEFAULT_TIERS)
  .map((t) => t.backups_kept)
  .join('/');

/** A zod field for configs: TIER_LIMITS_JSON → the merged table, with a readable error. */
export const tiersConfig = z
  .string()
  .optional()
  .transform((v, ctx) => {
    try {
      return parseTiers(v);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `TIER_LIMITS_JSON is invalid: ${(err as Error).message}` });
      return z.NEVER;
    }
  })
  .meta({
    accepts: 'JSON',
    description:
      `Per-tier overrides, merged over the tier table, e.g. \`{"free":{"requests_per_day":500}}\` (fields: ${fieldNames}; -1 = unlimited; ` +
      `backups_kept is ${backupsKept} by default, 0 = no backups).`,
    shownDefault: 'the tier table of `packages/shared/src/tiers.ts`',
  });

/** remaining = limit - used, or -1 when unlimited. */
export const remaining = (limitValue: number, used: number): number => (limitValue === UNLIMITED ? UNLIMITED : Math.max(0, limitValue - used));
