/**
 * Slots, epochs, blockhashes and blocks. Every devchain slot is a block (no slot is ever
 * skipped), block height = slot, and epochs follow src/epochs.ts.
 */
import type { Chain } from '../chain.ts';
import { EpochSchedule } from '../epochs.ts';
import { RpcCode, RpcError, invalidParams } from '../errors.ts';
import type { Methods } from '../rpc.ts';
import { checkVersion, parseMaxVersion, parseTxEncoding, transactionAccountsJson, transactionJson } from '../transaction-json.ts';
import { atLeastConfirmed, bool, cfgAt, commitmentOf, list, rpcContext, slotFor, uint } from './params.ts';
import type { Config } from './params.ts';

/** agave's MAX_GET_CONFIRMED_BLOCKS_RANGE */
const MAX_BLOCKS_RANGE = 500_000;
const DETAILS = ['full', 'accounts', 'signatures', 'none'] as const;

const blockNotAvailable = (slot: number) => new RpcError(RpcCode.BlockNotAvailable, `Block not available for slot ${slot}`);

export function blockMethods(chain: Chain): Methods {
  const { clock, ledger } = chain;
  const epochs = new EpochSchedule(chain.config.slotsPerEpoch);

  /** The newest block a ledger read at this commitment may see; later slots are -32004. */
  const visibleBlock = (slot: number, cfg: Config): void => {
    if (slot > clock.commitmentSlot(atLeastConfirmed(cfg))) throw blockNotAvailable(slot);
  };

  const getBlock = (ps: unknown[]) => {
    const slot = uint(ps[0], 'slot');
    const cfg = typeof ps[1] === 'string' ? { encoding: ps[1] } : cfgAt(ps, 1);
    const encoding = parseTxEncoding(cfg.encoding);
    const details = cfg.transactionDetails ?? 'full';
    if (!(DETAILS as readonly unknown[]).includes(details))
      throw invalidParams(`unknown variant \`${String(details)}\`, expected one of ${DETAILS.join(', ')}`);
    const rewards = bool(cfg.rewards, 'rewards', true);
    const maxVersion = parseMaxVersion(cfg.maxSupportedTransactionVersion);
    visibleBlock(slot, cfg);
    const records = ledger.inSlot(slot);
    if (details === 'full' || details === 'accounts') records.forEach((r) => checkVersion(r, maxVersion));
    const parent = Math.max(0, slot - 1);
    const block: Record<string, unknown> = {
      blockHeight: slot,
      blockTime: clock.blockTime(slot),
      blockhash: clock.blockhashOf(slot),
      parentSlot: parent,
      previousBlockhash: clock.blockhashOf(parent),
    };
    if (rewards) block.rewards = [];
    const withVersion = maxVersion !== null;
    if (details === 'full') block.transactions = records.map((r) => transactionJson(r, encoding, withVersion));
    else if (details === 'accounts') block.transactions = records.map((r) => transactionAccountsJson(r, withVersion));
    else if (details === 'signatures') block.signatures = records.map((r) => r.signature);
    return block;
  };

  const blockRange = (start: number, end: number, cfg: Config): number[] => {
    const last = Math.min(end, clock.commitmentSlot(atLeastConfirmed(cfg)));
    const out: number[] = [];
    for (let s = start; s <= last; s++) out.push(s);
    return out;
  };

  return {
    getSlot: (p) => slotFor(clock, cfgAt(list(p), 0)),
    getBlockHeight: (p) => slotFor(clock, cfgAt(list(p), 0)),
    getFirstAvailableBlock: () => 0,
    minimumLedgerSlot: () => 0,
    getEpochInfo: (p) => {
      const slot = slotFor(clock, cfgAt(list(p), 0));
      return {
        absoluteSlot: slot,
        blockHeight: slot,
        epoch: epochs.epochOf(slot),
        slotIndex: slot - epochs.firstSlotOf(epochs.epochOf(slot)),
        slotsInEpoch: epochs.slotsPerEpoch,
        transactionCount: ledger.transactionCount,
      };
    },
    getEpochSchedule: () => epochs.toJson(),
    getLatestBlockhash: (p) => {
      const cfg = cfgAt(list(p), 0);
      slotFor(clock, cfg);
      const latest = clock.latestBlockhash(commitmentOf(cfg));
      return { context: rpcContext(latest.slot), value: { blockhash: latest.blockhash, lastValidBlockHeight: latest.lastValidBlockHeight } };
    },
    isBlockhashValid: (p) => {
      const ps = list(p);
      if (typeof ps[0] !== 'string') throw invalidParams('blockhash must be a base58 string');
      const slot = slotFor(clock, cfgAt(ps, 1));
      return { context: rpcContext(slot), value: clock.isBlockhashValid(ps[0], slot) };
    },
    getBlockTime: (p) => {
      const slot = uint(list(p)[0], 'slot');
      visibleBlock(slot, { commitment: 'confirmed' });
      return clock.blockTime(slot);
    },
    getBlock: (p) => getBlock(list(p)),
    getBlocks: (p) => {
      const ps = list(p);
      const start = uint(ps[0], 'start slot');
      const endGiven = typeof ps[1] === 'number';
      const end = endGiven ? uint(ps[1], 'end slot') : start + MAX_BLOCKS_RANGE;
      if (end - start > MAX_BLOCKS_RANGE) throw invalidParams(`Slot range too large; max ${MAX_BLOCKS_RANGE}`);
      return blockRange(start, end, cfgAt(ps, endGiven ? 2 : 1));
    },
    getBlocksWithLimit: (p) => {
      const ps = list(p);
      const start = uint(ps[0], 'start slot');
      const limit = uint(ps[1], 'limit');
      if (limit > MAX_BLOCKS_RANGE) throw invalidParams(`Limit too large; max ${MAX_BLOCKS_RANGE}`);
      return limit === 0 ? [] : blockRange(start, start + limit - 1, cfgAt(ps, 2));
    },
  };
}
