import type { Migration } from 'kysely';
import * as init from './2026-11-22T00-00-00-init.ts';
import * as expiryWarned from './2026-11-27T00-00-00-expiry-warned.ts';
import { sealKeeperKeys } from './2026-11-28T00-00-00-seal-keeper-key.ts';
import * as pdaNotUnique from './2026-11-30T00-00-00-pda-not-unique.ts';

/** The billing schema's migrations; `dataKey` seals the keeper key (domain/keeper-key.ts). */
export const migrations = (dataKey: Buffer | undefined): Record<string, Migration> => ({
  '2026-11-22T00-00-00-init': init,
  '2026-11-27T00-00-00-expiry-warned': expiryWarned,
  '2026-11-28T00-00-00-seal-keeper-key': sealKeeperKeys(dataKey),
  '2026-11-30T00-00-00-pda-not-unique': pdaNotUnique,
});
