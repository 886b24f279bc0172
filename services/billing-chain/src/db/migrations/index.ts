import type { Migration } from 'kysely';
import * as init from './2026-11-22T00-00-00-init.ts';
import * as expiryWarned from './2026-11-27T00-00-00-expiry-warned.ts';

export const migrations: Record<string, Migration> = {
  '2026-11-22T00-00-00-init': init,
  '2026-11-27T00-00-00-expiry-warned': expiryWarned,
};
