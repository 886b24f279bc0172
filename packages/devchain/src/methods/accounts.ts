/** Account reads: balances, single and multiple accounts, and program account scans. */
import { accountJson, checkSliceAndEncoding, parseAccountEncoding } from '../account-json.ts';
import { rentExemptMinimum } from '../accounts.ts';
import type { Chain } from '../chain.ts';
import { parsePubkey } from '../encoding.ts';
import { invalidParams } from '../errors.ts';
import { matchesAll, parseFilters } from '../filters.ts';
import type { Methods } from '../rpc.ts';
import { bool, cfgAt, dataSliceOf, list, rpcContext, slotFor, uint } from './params.ts';

const MAX_MULTIPLE_ACCOUNTS = 100;
const MAX_DATA_LENGTH = 10 * 1024 * 1024;

export function accountMethods(chain: Chain): Methods {
  const { clock, accounts } = chain;
  return {
    getMinimumBalanceForRentExemption: (p) => {
      const ps = list(p);
      const len = uint(ps[0], 'data length');
      if (len > MAX_DATA_LENGTH) throw invalidParams('data length exceeds 10 MiB');
      return rentExemptMinimum(len);
    },
    getBalance: (p) => {
      const ps = list(p);
      const key = parsePubkey(ps[0]);
      const slot = slotFor(clock, cfgAt(ps, 1));
      return { context: rpcContext(slot), value: accounts.get(key, slot)?.lamports ?? 0n };
    },
    // With no encoding, agave answers the legacy "binary" shape: data as a bare base58 string.
    getAccountInfo: (p) => {
      const ps = list(p);
      const key = parsePubkey(ps[0]);
      const cfg = cfgAt(ps, 1);
      const encoding = parseAccountEncoding(cfg.encoding, 'binary');
      const slice = dataSliceOf(cfg);
      checkSliceAndEncoding(encoding, slice);
      const slot = slotFor(clock, cfg);
      return { context: rpcContext(slot), value: accountJson(accounts.get(key, slot), encoding, slice) };
    },
    getMultipleAccounts: (p) => {
      const ps = list(p);
      if (!Array.isArray(ps[0])) throw invalidParams('pubkeys must be an array');
      if (ps[0].length > MAX_MULTIPLE_ACCOUNTS) throw invalidParams(`Too many inputs provided; max ${MAX_MULTIPLE_ACCOUNTS}`);
      const keys = ps[0].map((k) => parsePubkey(k));
      const cfg = cfgAt(ps, 1);
      const encoding = parseAccountEncoding(cfg.encoding, 'base64');
      const slice = dataSliceOf(cfg);
      checkSliceAndEncoding(encoding, slice);
      const slot = slotFor(clock, cfg);
      return { context: rpcContext(slot), value: keys.map((k) => accountJson(accounts.get(k, slot), encoding, slice)) };
    },
    getProgramAccounts: (p) => {
      const ps = list(p);
      const program = parsePubkey(ps[0], 'program id');
      const cfg = cfgAt(ps, 1);
      const encoding = parseAccountEncoding(cfg.encoding, 'binary');
      const slice = dataSliceOf(cfg);
      checkSliceAndEncoding(encoding, slice);
      const filters = parseFilters(cfg.filters);
      const withContext = bool(cfg.withContext, 'withContext', false);
      const slot = slotFor(clock, cfg);
      const value: Array<{ account: Record<string, unknown> | null; pubkey: string }> = [];
      for (const [pubkey, account] of accounts.ownedBy(program, slot)) {
        if (matchesAll(account, filters)) value.push({ account: accountJson(account, encoding, slice), pubkey });
      }
      return withContext ? { context: rpcContext(slot), value } : value;
    },
  };
}
