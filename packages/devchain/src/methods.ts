/** Solana JSON-RPC methods (the subset @solana/web3.js v1 Connection uses) and devchain_* methods. */
import { PERIOD_SECONDS } from '@agenthost/subscription-program';
import { rentExemptMinimum } from './accounts.ts';
import type { Chain } from './chain.ts';
import { FAUCET } from './chain.ts';
import type { Commitment } from './clock.ts';
import { b58decode, parsePubkey, parseSignature } from './encoding.ts';
import { RpcCode, RpcError, invalidParams } from './errors.ts';
import { accountJson, parseAccountEncoding, transactionJson } from './format.ts';
import type { TxEncoding } from './format.ts';
import type { Methods, Params } from './rpc.ts';
import { LAMPORTS_PER_SIGNATURE } from './runtime.ts';
import { decodeMessage } from './transaction.ts';

export const SOLANA_CORE_VERSION = '2.1.0';
/** Signature statuses are kept this many slots without searchTransactionHistory (agave's status cache). */
const STATUS_CACHE_SLOTS = 300;

function list(params: Params): unknown[] {
  if (!Array.isArray(params)) throw invalidParams('expected an array of parameters');
  return params;
}

function cfgAt(params: unknown[], i: number): Record<string, unknown> {
  const v = params[i];
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalidParams(`parameter ${i} must be a configuration object`);
  return v as Record<string, unknown>;
}

const COMMITMENTS: Record<string, Commitment> = {
  processed: 'processed',
  recent: 'processed',
  confirmed: 'confirmed',
  single: 'confirmed',
  singleGossip: 'confirmed',
  finalized: 'finalized',
  root: 'finalized',
  max: 'finalized',
};

function commitmentOf(cfg: Record<string, unknown>, fallback: Commitment = 'finalized'): Commitment {
  const v = cfg.commitment;
  if (v === undefined || v === null) return fallback;
  const c = typeof v === 'string' ? COMMITMENTS[v] : undefined;
  if (!c) throw invalidParams(`unknown commitment ${JSON.stringify(v)}`);
  return c;
}

function atLeastConfirmed(cfg: Record<string, unknown>): Commitment {
  const c = commitmentOf(cfg);
  if (c === 'processed') throw invalidParams('Method does not support commitment below `confirmed`');
  return c;
}

function bool(v: unknown, name: string, fallback: boolean): boolean {
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'boolean') throw invalidParams(`${name} must be a boolean`);
  return v;
}

function uint(v: unknown, name: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw invalidParams(`${name} must be a non-negative integer`);
  return v;
}

function decodeWire(v: unknown, encoding: unknown): Uint8Array {
  if (typeof v !== 'string') throw invalidParams('transaction must be an encoded string');
  const enc = encoding ?? 'base58';
  if (enc === 'base64') {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(v) || v.length % 4 !== 0) throw invalidParams('invalid base64 encoding');
    return new Uint8Array(Buffer.from(v, 'base64'));
  }
  if (enc === 'base58') {
    const bytes = b58decode(v);
    if (bytes === null) throw invalidParams('invalid base58 encoding');
    return bytes;
  }
  throw invalidParams(`unsupported encoding ${JSON.stringify(enc)} (base58 or base64)`);
}

export function createMethods(chain: Chain): Methods {
  const clock = chain.clock;
  const context = (slot: number) => ({ apiVersion: SOLANA_CORE_VERSION, slot });
  const slotFor = (cfg: Record<string, unknown>, fallback: Commitment = 'finalized'): number => {
    const slot = clock.commitmentSlot(commitmentOf(cfg, fallback));
    if (cfg.minContextSlot !== undefined && cfg.minContextSlot !== null && uint(cfg.minContextSlot, 'minContextSlot') > slot) {
      throw new RpcError(RpcCode.MinContextSlotNotReached, 'Minimum context slot has not been reached', { contextSlot: slot });
    }
    return slot;
  };
  const dataSlice = (cfg: Record<string, unknown>) => {
    const ds = cfg.dataSlice as { offset?: unknown; length?: unknown } | undefined;
    return ds === undefined || ds === null ? undefined : { offset: uint(ds.offset, 'dataSlice.offset'), length: uint(ds.length, 'dataSlice.length') };
  };

  const methods: Methods = {
    getHealth: () => 'ok',
    getVersion: () => ({ 'feature-set': 1725507508, 'solana-core': SOLANA_CORE_VERSION }),
    getGenesisHash: () => chain.genesisHash,
    getIdentity: () => ({ identity: FAUCET.publicKey.toBase58() }),
    getFirstAvailableBlock: () => 0,
    minimumLedgerSlot: () => 0,
    getTransactionCount: (p) => (slotFor(cfgAt(list(p), 0)), chain.ledger.transactionCount),
    getRecentPrioritizationFees: (p) => {
      const ps = list(p);
      if (ps[0] !== undefined && ps[0] !== null) {
        if (!Array.isArray(ps[0])) throw invalidParams('addresses must be an array');
        ps[0].forEach((a) => parsePubkey(a, 'address'));
      }
      return [];
    },
    getSlot: (p) => slotFor(cfgAt(list(p), 0)),
    getBlockHeight: (p) => slotFor(cfgAt(list(p), 0)),
    getEpochInfo: (p) => {
      const slot = slotFor(cfgAt(list(p), 0));
      return {
        absoluteSlot: slot,
        blockHeight: slot,
        epoch: Math.floor(slot / 432_000),
        slotIndex: slot % 432_000,
        slotsInEpoch: 432_000,
        transactionCount: chain.ledger.transactionCount,
      };
    },
    getLatestBlockhash: (p) => {
      const cfg = cfgAt(list(p), 0);
      slotFor(cfg);
      const latest = clock.latestBlockhash(commitmentOf(cfg));
      return { context: context(latest.slot), value: { blockhash: latest.blockhash, lastValidBlockHeight: latest.lastValidBlockHeight } };
    },
    isBlockhashValid: (p) => {
      const ps = list(p);
      if (typeof ps[0] !== 'string') throw invalidParams('blockhash must be a base58 string');
      const slot = slotFor(cfgAt(ps, 1));
      return { context: context(slot), value: clock.isBlockhashValid(ps[0], slot) };
    },
    getFeeForMessage: (p) => {
      const ps = list(p);
      const slot = slotFor(cfgAt(ps, 1));
      let msg;
      try {
        msg = decodeMessage(decodeWire(ps[0], 'base64'));
      } catch (e) {
        if (e instanceof RpcError) throw e;
        throw invalidParams(`invalid message: ${(e as Error).message}`);
      }
      const valid = clock.isBlockhashValid(msg.recentBlockhash, slot);
      return { context: context(slot), value: valid ? Number(LAMPORTS_PER_SIGNATURE) * msg.header.numRequiredSignatures : null };
    },
    getMinimumBalanceForRentExemption: (p) => {
      const ps = list(p);
      const len = uint(ps[0], 'data length');
      if (len > 10 * 1024 * 1024) throw invalidParams('data length exceeds 10 MiB');
      return Number(rentExemptMinimum(len));
    },
    getBalance: (p) => {
      const ps = list(p);
      const key = parsePubkey(ps[0]);
      const slot = slotFor(cfgAt(ps, 1));
      return { context: context(slot), value: Number(chain.accounts.get(key, slot)?.lamports ?? 0n) };
    },
    getAccountInfo: (p) => {
      const ps = list(p);
      const key = parsePubkey(ps[0]);
      const cfg = cfgAt(ps, 1);
      const slot = slotFor(cfg);
      const enc = parseAccountEncoding(cfg.encoding, 'base58');
      return { context: context(slot), value: accountJson(chain.accounts.get(key, slot), enc, dataSlice(cfg)) };
    },
    getMultipleAccounts: (p) => {
      const ps = list(p);
      if (!Array.isArray(ps[0])) throw invalidParams('pubkeys must be an array');
      if (ps[0].length > 100) throw invalidParams('Too many inputs provided; max 100');
      const keys = ps[0].map((k) => parsePubkey(k));
      const cfg = cfgAt(ps, 1);
      const slot = slotFor(cfg);
      const enc = parseAccountEncoding(cfg.encoding, 'base64');
      return { context: context(slot), value: keys.map((k) => accountJson(chain.accounts.get(k, slot), enc, dataSlice(cfg))) };
    },
    requestAirdrop: (p) => {
      const ps = list(p);
      const key = parsePubkey(ps[0]);
      const lamports = ps[1];
      if (typeof lamports !== 'number' || !Number.isSafeInteger(lamports) || lamports <= 0) throw invalidParams('lamports must be a positive integer');
      slotFor(cfgAt(ps, 2));
      return chain.airdrop(key, lamports);
    },
    sendTransaction: (p) => {
      const ps = list(p);
      const cfg = cfgAt(ps, 1);
      const raw = decodeWire(ps[0], cfg.encoding);
      const preflightCommitment = commitmentOf({ commitment: cfg.preflightCommitment });
      slotFor({ commitment: preflightCommitment, minContextSlot: cfg.minContextSlot });
      return chain.submit(raw, { skipPreflight: bool(cfg.skipPreflight, 'skipPreflight', false), preflightCommitment });
    },
    simulateTransaction: (p) => {
      const ps = list(p);
      const cfg = cfgAt(ps, 1);
      const raw = decodeWire(ps[0], cfg.encoding);
      const sigVerify = bool(cfg.sigVerify, 'sigVerify', false);
      const replaceRecentBlockhash = bool(cfg.replaceRecentBlockhash, 'replaceRecentBlockhash', false);
      if (sigVerify && replaceRecentBlockhash) throw invalidParams('sigVerify may not be used with replaceRecentBlockhash');
      slotFor(cfg);
      const accountsCfg = cfg.accounts as { addresses?: unknown; encoding?: unknown } | undefined | null;
      let addresses: string[] | undefined;
      if (accountsCfg?.addresses !== undefined) {
        if (!Array.isArray(accountsCfg.addresses)) throw invalidParams('accounts.addresses must be an array');
        addresses = accountsCfg.addresses.map((a) => parsePubkey(a, 'address'));
      }
      const enc = parseAccountEncoding(accountsCfg?.encoding, 'base64');
      const { slot, result, replacementBlockhash } = chain.simulate(raw, { sigVerify, replaceRecentBlockhash, commitment: commitmentOf(cfg) });
      const value: Record<string, unknown> = { accounts: null, err: result.err, innerInstructions: null, logs: [], replacementBlockhash: replacementBlockhash ?? null, returnData: null, unitsConsumed: 0 };
      if (result.kind === 'executed') {
        value.logs = result.logs;
        value.unitsConsumed = result.unitsConsumed;
        if (addresses) value.accounts = addresses.map((a) => accountJson(result.writes.get(a) ?? chain.accounts.get(a, slot), enc));
        if (cfg.innerInstructions === true) value.innerInstructions = [];
      }
      return { context: context(slot), value };
    },
    getSignatureStatuses: (p) => {
      const ps = list(p);
      if (!Array.isArray(ps[0])) throw invalidParams('signatures must be an array');
      if (ps[0].length > 256) throw invalidParams('Too many inputs provided; max 256');
      const sigs = ps[0].map(parseSignature);
      const search = bool(cfgAt(ps, 1).searchTransactionHistory, 'searchTransactionHistory', false);
      const value = sigs.map((s) => {
        const r = chain.ledger.get(s);
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
      return { context: context(clock.slot), value };
    },
    getTransaction: (p) => {
      const ps = list(p);
      const sig = parseSignature(ps[0]);
      const cfg = typeof ps[1] === 'string' ? { encoding: ps[1] } : cfgAt(ps, 1);
      const encoding = (cfg.encoding ?? 'json') as TxEncoding;
      if (!['json', 'jsonParsed', 'base64', 'base58'].includes(encoding)) throw invalidParams(`unsupported encoding ${JSON.stringify(cfg.encoding)}`);
      const maxVersion = cfg.maxSupportedTransactionVersion;
      if (maxVersion !== undefined && maxVersion !== null && maxVersion !== 0) throw invalidParams('maxSupportedTransactionVersion must be 0');
      const maxSlot = clock.commitmentSlot(atLeastConfirmed(cfg));
      const r = chain.ledger.get(sig);
      if (!r || r.slot > maxSlot) return null;
      const supportsVersions = maxVersion === 0;
      if (r.tx.version !== 'legacy' && !supportsVersions) {
        throw new RpcError(
          RpcCode.TransactionVersionNotSupported,
          `Transaction version (${r.tx.version}) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": ${r.tx.version}`,
        );
      }
      return transactionJson(r, encoding, supportsVersions);
    },
    getSignaturesForAddress: (p) => {
      const ps = list(p);
      const address = parsePubkey(ps[0], 'address');
      const cfg = cfgAt(ps, 1);
      const limit = cfg.limit === undefined || cfg.limit === null ? 1000 : uint(cfg.limit, 'limit');
      if (limit < 1 || limit > 1000) throw invalidParams('Invalid limit; max 1000');
      const before = cfg.before === undefined || cfg.before === null ? undefined : parseSignature(cfg.before);
      const until = cfg.until === undefined || cfg.until === null ? undefined : parseSignature(cfg.until);
      const maxSlot = clock.commitmentSlot(atLeastConfirmed(cfg));
      return chain.ledger.history(address, { maxSlot, limit, before, until }).map((r) => ({
        blockTime: r.blockTime,
        confirmationStatus: clock.statusOf(r.slot),
        err: r.err,
        memo: r.memo,
        signature: r.signature,
        slot: r.slot,
      }));
    },
  };

  if (chain.config.devMethods) {
    methods.devchain_advanceClock = (p) => {
      const seconds = Array.isArray(p) ? p[0] : p.seconds;
      if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) throw invalidParams('seconds must be a number >= 0');
      return clock.advance(seconds);
    };
    methods.devchain_getClock = () => ({ unixTimestamp: clock.now(), offsetSeconds: clock.offset, slot: clock.slot });
    methods.devchain_getConfig = () => devchainInfo(chain);
  }
  return methods;
}

export function devchainInfo(chain: Chain) {
  const c = chain.config;
  return {
    programId: c.programId,
    treasury: c.treasury,
    prices: { ...c.prices },
    periodSeconds: PERIOD_SECONDS,
    slotMs: c.slotMs,
    finalizeSlots: c.finalizeSlots,
    lamportsPerSignature: Number(LAMPORTS_PER_SIGNATURE),
    faucet: FAUCET.publicKey.toBase58(),
  };
}
