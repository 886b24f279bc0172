/**
 * SPL Token methods. devchain runs no token program, so no account is a token account or a
 * mint; these give the answers a real node gives for a wallet that holds no tokens, and
 * agave's -32602 wording where it refuses, so wallets that always ask keep working.
 */
import { parseAccountEncoding } from '../account-json.ts';
import type { Chain } from '../chain.ts';
import { parsePubkey } from '../encoding.ts';
import { RpcCode, RpcError, invalidParams } from '../errors.ts';
import type { Methods } from '../rpc.ts';
import { cfgAt, list, rpcContext, slotFor } from './params.ts';

const TOKEN_PROGRAMS = new Set(['TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA', 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb']);

/** agave's own messages here say "Invalid param:" (singular), without the serde prefix. */
const refused = (message: string) => new RpcError(RpcCode.InvalidParams, `Invalid param: ${message}`);

export function tokenMethods(chain: Chain): Methods {
  const { clock, accounts } = chain;

  /** agave's refusal for a token account or mint: missing, or (always, here) not owned by a token program. */
  const refuseToken = (key: string, slot: number, missing: string, notToken: string): never => {
    throw refused(accounts.get(key, slot) === null ? missing : notToken);
  };

  /** { mint } or { programId }: the mint must exist and be a token mint; the program must be a token program. */
  const checkFilter = (v: unknown, slot: number): void => {
    const f = v as { mint?: unknown; programId?: unknown } | null;
    if (typeof v !== 'object' || f === null || (f.mint === undefined) === (f.programId === undefined)) {
      throw invalidParams('expected { mint } or { programId } as the second parameter');
    }
    if (f.programId !== undefined) {
      if (!TOKEN_PROGRAMS.has(parsePubkey(f.programId, 'programId'))) throw refused('unrecognized Token program id');
      return;
    }
    refuseToken(parsePubkey(f.mint, 'mint'), slot, 'could not find mint', 'not a Token mint');
  };

  const byKey = (p: unknown[]) => {
    const ps = list(p);
    parsePubkey(ps[0]);
    const cfg = cfgAt(ps, 2);
    parseAccountEncoding(cfg.encoding, 'binary');
    const slot = slotFor(clock, cfg);
    checkFilter(ps[1], slot);
    return { context: rpcContext(slot), value: [] };
  };

  const mintQuery = (p: unknown[]) => {
    const ps = list(p);
    const mint = parsePubkey(ps[0], 'mint');
    return refuseToken(mint, slotFor(clock, cfgAt(ps, 1)), 'could not find account', 'not a Token mint');
  };

  return {
    getTokenAccountsByOwner: (p) => byKey(list(p)),
    getTokenAccountsByDelegate: (p) => byKey(list(p)),
    getTokenAccountBalance: (p) => {
      const ps = list(p);
      const key = parsePubkey(ps[0]);
      return refuseToken(key, slotFor(clock, cfgAt(ps, 1)), 'could not find account', 'not a Token account');
    },
    getTokenSupply: (p) => mintQuery(list(p)),
    getTokenLargestAccounts: (p) => mintQuery(list(p)),
  };
}
