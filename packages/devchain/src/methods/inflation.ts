/**
 * Inflation and stake, as mainnet answers them, for devchain's cluster: mainnet's inflation
 * governor (Inflation::full(): 8% tapering 15% a year to 1.5%, nothing to the foundation),
 * running from devchain's genesis; no stake account, so no address ever earns a reward; and
 * mainnet's current minimum stake delegation (1 SOL).
 */
import type { Chain } from '../chain.ts';
import { EpochSchedule } from '../epochs.ts';
import { RpcCode, RpcError } from '../errors.ts';
import type { Methods } from '../rpc.ts';
import {
  atLeastConfirmed,
  commitmentOf,
  list,
  noParams,
  paramError,
  rpcContext,
  serdeError,
  slotFor,
  structParam,
  u64Param,
  unexpected,
  verifyPubkey,
} from './params.ts';

const GOVERNOR = { initial: 0.08, terminal: 0.015, taper: 0.15, foundation: 0, foundationTerm: 0 };
/** agave's SECONDS_PER_YEAR (365.242199 days), over which the taper applies. */
const SECONDS_PER_YEAR = 365.242_199 * 24 * 60 * 60;
/** agave's MAX_GET_INFLATION_REWARD_ADDRESSES */
const MAX_REWARD_ADDRESSES = 32;
const STAKE_MINIMUM_DELEGATION = 1_000_000_000;

// serde_json writes every f64 with a fraction ("0.0", "7.0"); JSON.stringify would write "0".
const rawJson = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;
const f64 = (x: number): unknown => rawJson(Number.isInteger(x) ? x.toFixed(1) : String(x));

/** Inflation::total / foundation / validator at `year` years since inflation began. */
export function inflationAt(year: number): { total: number; validator: number; foundation: number } {
  const total = Math.max(GOVERNOR.initial * (1 - GOVERNOR.taper) ** year, GOVERNOR.terminal);
  const foundation = year < GOVERNOR.foundationTerm ? total * GOVERNOR.foundation : 0;
  return { total, validator: total - foundation, foundation };
}

export function inflationMethods(chain: Chain): Methods {
  const { clock } = chain;
  const epochs = new EpochSchedule(chain.config.slotsPerEpoch);
  // A year in devchain's slots, as agave's slots_per_year from the genesis tick rate.
  const slotsPerYear = (SECONDS_PER_YEAR * 1000) / chain.config.slotMs;

  return {
    getInflationGovernor: (p) => {
      commitmentOf(structParam(list(p)[0], 'CommitmentConfig'));
      return Object.fromEntries(Object.entries(GOVERNOR).map(([k, v]) => [k, f64(v)]));
    },

    // Of the root bank, as agave: the rate of the epoch the finalized slot is in, which
    // inflation reaches at that epoch's first slot.
    getInflationRate: (p) => {
      noParams(p);
      const epoch = epochs.epochOf(clock.commitmentSlot('finalized'));
      const rate = inflationAt(epochs.firstSlotOf(epoch) / slotsPerYear);
      return { total: f64(rate.total), validator: f64(rate.validator), foundation: f64(rate.foundation), epoch };
    },

    getInflationReward: (p) => {
      const ps = list(p);
      if (ps.length === 0) throw paramError('`params` should have at least 1 argument(s)');
      if (!Array.isArray(ps[0])) throw serdeError(`invalid type: ${unexpected(ps[0])}, expected a sequence`);
      if (ps[0].length > MAX_REWARD_ADDRESSES) throw paramError(`Too many inputs provided; max ${MAX_REWARD_ADDRESSES}`);
      const addresses = ps[0].map(verifyPubkey);
      const cfg = structParam(ps[1], 'RpcEpochConfig');
      const slot = slotFor(clock, cfg);
      const epoch = cfg.epoch === undefined || cfg.epoch === null ? Math.max(0, epochs.epochOf(slot) - 1) : u64Param(cfg.epoch, 0, 1);
      // An epoch's rewards are paid in the first block of the next epoch: until that block is
      // visible at the commitment there is nothing to read.
      const boundary = epochs.firstSlotOf(epoch + 1);
      if (boundary > clock.commitmentSlot(atLeastConfirmed(cfg))) {
        throw new RpcError(RpcCode.BlockNotAvailable, `Block not available for slot ${boundary}`);
      }
      // That block's rewards list no one: devchain has no stake or vote account.
      return addresses.map(() => null);
    },

    getStakeMinimumDelegation: (p) => {
      const slot = slotFor(clock, structParam(list(p)[0], 'RpcContextConfig'));
      return { context: rpcContext(slot), value: STAKE_MINIMUM_DELEGATION };
    },
  };
}
