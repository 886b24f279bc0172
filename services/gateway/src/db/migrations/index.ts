import type { Migration } from 'kysely';
import * as usage from './2026-11-22T00-00-00-usage.ts';
import * as usageLease from './2026-11-23T00-00-00-usage-lease.ts';
import * as usageLeases from './2026-11-24T00-00-00-usage-leases.ts';
import * as signInLimits from './2026-11-25T00-00-00-sign-in-limits.ts';
import * as idempotencyKeys from './2026-11-26T00-00-00-idempotency-keys.ts';
import * as webhooks from './2026-11-27T00-00-00-webhooks.ts';
import * as streams from './2026-11-28T00-00-00-streams.ts';
import * as usageReclaimed from './2026-11-29T00-00-00-usage-reclaimed.ts';

export const migrations: Record<string, Migration> = {
  '2026-11-22T00-00-00-usage': usage,
  '2026-11-23T00-00-00-usage-lease': usageLease,
  '2026-11-24T00-00-00-usage-leases': usageLeases,
  '2026-11-25T00-00-00-sign-in-limits': signInLimits,
  '2026-11-26T00-00-00-idempotency-keys': idempotencyKeys,
  '2026-11-27T00-00-00-webhooks': webhooks,
  '2026-11-28T00-00-00-streams': streams,
  '2026-11-29T00-00-00-usage-reclaimed': usageReclaimed,
};
