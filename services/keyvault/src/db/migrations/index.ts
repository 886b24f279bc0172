import type { Migration } from 'kysely';
import * as init from './2026-11-22T12-00-00-init.ts';
import * as keyEpoch from './2026-11-23T06-00-00-key-epoch.ts';
import * as instanceAuthLimits from './2026-11-28T16-00-00-instance-auth-limits.ts';

export const migrations: Record<string, Migration> = {
  '2026-11-22T12-00-00-init': init,
  '2026-11-23T06-00-00-key-epoch': keyEpoch,
  '2026-11-28T16-00-00-instance-auth-limits': instanceAuthLimits,
};
