import type { Migration } from 'kysely';
import * as init from './2026-11-22T00-00-00-init.ts';
import * as noStoredKeys from './2026-11-23T07-30-00-no-stored-keys.ts';
import * as revokedTokens from './2026-11-23T07-45-00-revoked-tokens.ts';
import * as noncesByWallet from './2026-11-23T18-00-00-nonces-by-wallet.ts';
import * as usedSignIns from './2026-11-23T19-00-00-used-sign-ins.ts';

export const migrations: Record<string, Migration> = {
  '2026-11-22T00-00-00-init': init,
  '2026-11-23T07-30-00-no-stored-keys': noStoredKeys,
  '2026-11-23T07-45-00-revoked-tokens': revokedTokens,
  '2026-11-23T18-00-00-nonces-by-wallet': noncesByWallet,
  '2026-11-23T19-00-00-used-sign-ins': usedSignIns,
};
