/** Sending, simulating and looking up transactions, and the faucet. */
import { accountJson, parseAccountEncoding } from '../account-json.ts';
import type { Chain } from '../chain.ts';
import { parsePubkey, parseSignature } from '../encoding.ts';
import { RpcError, invalidParams } from '../errors.ts';
import type { Methods } from '../rpc.ts';
import { LAMPORTS_PER_SIGNATURE } from '../runtime.ts';
import { decodeMessage } from '../transaction.ts';
import { checkVersion, parseMaxVersion, parseTxEncoding, transactionJson } from '../transaction-json.ts';
import { atLeastConfirmed, bool, cfgAt, commitmentOf, decodeWire, list, optionalSignature, rpcContext, slotFor, u64, uint } from './params.ts';

/** Signature statuses are kept this many slots without searchTransactionHistory (agave's status cache). */
const STATUS_CACHE_SLOTS = 300;
const MAX_SIGNATURES_FOR_ADDRESS = 1000;

export function transactionMethods(chain: Chain): Methods {
  const { clock, ledger } = chain;
  return {
    getFeeForMessage: (p) => {
      const ps = list(p);
      const slot = slotFor(clock, cfgAt(ps, 1));
      let msg;
      try {
        msg = decodeMessage(decodeWire(ps[0], 'base64'));
      } catch (e) {
        if (e instanceof RpcError) throw e;
        throw invalidParams(`invalid message: ${(e as Error).message}`);
      }
      const valid = clock.isBlockhashValid(msg.recentBlockhash, slot);
      return { context: rpcContext(slot), value: valid ? LAMPORTS_PER_SIGNATURE * BigInt(msg.header.numRequiredSignatures) : null };
    },
    requestAirdrop: (p) => {
      const ps = list(p);
      const key = parsePubkey(ps[0]);
      const lamports = u64(ps[1], 'lamports');
      if (lamports === 0n) throw invalidParams('lamports must be a positive integer');
      slotFor(clock, cfgAt(ps, 2));
      return chain.airdrop(key, lamports);
    },
    sendTransaction: (p) => {
      const ps = list(p);
      const cfg = cfgAt(ps, 1);
      const raw = decodeWire(ps[0], cfg.encoding);
      const preflightCommitment = commitmentOf({ commitment: cfg.preflightCommitment });
      slotFor(clock, { commitment: preflightCommitment, minContextSlot: cfg.minContextSlot });
      return chain.submit(raw, { skipPreflight: bool(cfg.skipPreflight, 'skipPreflight', false), preflightCommitment });
    },
    simulateTransaction: (p) => {
      const ps = list(p);
      const cfg = cfgAt(ps, 1);
      const raw = decodeWire(ps[0], cfg.encoding);
      const sigVerify = bool(cfg.sigVerify, 'sigVerify', false);
      const replaceRecentBlockhash = bool(cfg.replaceRecentBlockhash, 'replaceRecentBlockhash', false);
      if (sigVerify && replaceRecentBlockhash) throw invalidParams('sigVerify may not be used with replaceRecentBlockhash');
      slotFor(clock, cfg);
      const accountsCfg = cfg.accounts as { addresses?: unknown; encoding?: unknown } | undefined | null;
      let addresses: string[] | undefined;
      if (accountsCfg?.addresses !== undefined) {
        if (!Array.isArray(accountsCfg.addresses)) throw invalidParams('accounts.addresses must be an array');
        addresses = accountsCfg.addresses.map((a) => parsePubkey(a, 'address'));
      }
      const enc = parseAccountEncoding(accountsCfg?.encoding, 'base64');
      if (enc === 'binary' || enc === 'base58') throw invalidParams('base58 encoding not supported');
      const { slot, result, replacementBlockhash } = chain.simulate(raw, { sigVerify, replaceRecentBlockhash, commitment: commitmentOf(cfg) });
      const value: Record<string, unknown> = {
        accounts: null,
        err: result.err,
        innerInstructions: null,
        logs: [],
        replacementBlockhash: replacementBlockhash ?? null,
        returnData: null,
        unitsConsumed: 0,
      };
      if (result.kind === 'executed') {
        value.logs = result.logs;
        value.unitsConsumed = result.unitsConsumed;
        if (addresses) value.accounts = addresses.map((a) => accountJson(result.writes.get(a) ?? chain.accounts.get(a, slot), enc));
        if (cfg.innerInstructions === true) value.innerInstructions = [];
      }
      return { context: rpcContext(slot), value };
    },
    getSignatureStatuses: (p) => {
      const ps = list(p);
      if (!Array.isArray(ps[0])) throw invalidParams('signatures must be an array');
      if (ps[0].length > 256) throw invalidParams('Too many inputs provided; max 256');
      const sigs = ps[0].map(parseSignature);
      const search = bool(cfgAt(ps, 1).searchTransactionHistory, 'searchTransactionHistory', false);
      const value = sigs.map((s) => {
        const r = ledger.get(s);
        if (!r || (!search && clock.slot - r.slot > STATUS_CACHE_SLOTS)) return null;
        const status = clock.statusOf(r.slot);
        return {
          confirmationStatus: status,
          confirmations: status === 'finalized' ? null : clock.slot - r.slot,
          err: r.err,
          slot: r.slot,
          status: r.err === null ? { Ok: null } : { Err: r.err },
        };
      });
      return { context: rpcContext(clock.slot), value };
    },
    getTransaction: (p) => {
      const ps = list(p);
      const sig = parseSignature(ps[0]);
      const cfg = typeof ps[1] === 'string' ? { encoding: ps[1] } : cfgAt(ps, 1);
      const encoding = parseTxEncoding(cfg.encoding);
      const maxVersion = parseMaxVersion(cfg.maxSupportedTransactionVersion);
      const maxSlot = clock.commitmentSlot(atLeastConfirmed(cfg));
      const r = ledger.get(sig);
      if (!r || r.slot > maxSlot) return null;
      checkVersion(r, maxVersion);
      return { blockTime: clock.blockTime(r.slot), slot: r.slot, ...transactionJson(r, encoding, maxVersion !== null) };
    },
    getSignaturesForAddress: (p) => {
      const ps = list(p);
      const address = parsePubkey(ps[0], 'address');
      const cfg = cfgAt(ps, 1);
      const limit = cfg.limit === undefined || cfg.limit === null ? MAX_SIGNATURES_FOR_ADDRESS : uint(cfg.limit, 'limit');
      if (limit < 1 || limit > MAX_SIGNATURES_FOR_ADDRESS) throw invalidParams(`Invalid limit; max ${MAX_SIGNATURES_FOR_ADDRESS}`);
      const before = optionalSignature(cfg.before);
      const until = optionalSignature(cfg.until);
      const maxSlot = slotFor(clock, { commitment: atLeastConfirmed(cfg), minContextSlot: cfg.minContextSlot });
      return ledger.history(address, { maxSlot, limit, before, until }).map((r) => ({
        blockTime: clock.blockTime(r.slot),
        confirmationStatus: clock.statusOf(r.slot),
        err: r.err,
        memo: r.memo,
        signature: r.signature,
        slot: r.slot,
      }));
    },
  };
}
