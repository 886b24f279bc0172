/**
 * What a node says about the cluster's validators, for devchain's cluster: one node (the
 * identity getIdentity names) that leads every slot and produces every block, with no stake
 * and no vote accounts (getVoteAccounts is empty). Shapes and wording follow agave's
 * rpc/src/rpc.rs and rpc-client-api's response types.
 */
import { b58decode } from '../encoding.ts';
import type { Chain } from '../chain.ts';
import { FAUCET } from '../chain.ts';
import { EpochSchedule } from '../epochs.ts';
import { MAX_PERF_SAMPLES } from '../perf.ts';
import type { Methods } from '../rpc.ts';
import {
  FEATURE_SET,
  SOLANA_CORE_VERSION,
  commitmentOf,
  list,
  noParams,
  paramError,
  rpcContext,
  serdeError,
  structParam,
  u64Param,
  verifyPubkey,
} from './params.ts';

/** The slots a bank's SlotHistory sysvar remembers (agave's MAX_ENTRIES): getBlockProduction's reach. */
const SLOT_HISTORY_ENTRIES = 1024 * 1024;

/** agave's compute_shred_version with no hard forks: the genesis hash folded into 16 bits, plus 1. */
export function shredVersion(genesisHash: string): number {
  const hash = b58decode(genesisHash) as Uint8Array;
  let hi = 0;
  let lo = 0;
  for (let i = 0; i < hash.length; i += 2) {
    hi ^= hash[i] as number;
    lo ^= hash[i + 1] ?? 0;
  }
  return Math.min(((hi << 8) | lo) + 1, 0xffff);
}

export function validatorMethods(chain: Chain): Methods {
  const { clock } = chain;
  const epochs = new EpochSchedule(chain.config.slotsPerEpoch);
  const identity = FAUCET.publicKey.toBase58();
  // Every epoch's schedule is the same list of slot indexes, [0 .. slotsPerEpoch-1]: made once.
  let slotIndexes: number[] | undefined;
  const schedule = () => (slotIndexes ??= Array.from({ length: epochs.slotsPerEpoch }, (_, i) => i));

  /** The identity filter of getLeaderSchedule / getBlockProduction: undefined for all leaders. */
  const identityFilter = (cfg: Record<string, unknown>): string | undefined =>
    cfg.identity === undefined || cfg.identity === null ? undefined : verifyPubkey(cfg.identity);

  return {
    getClusterNodes: (p) => {
      noParams(p);
      // devchain runs no gossip, TPU, TVU or repair service: those addresses are null.
      return [
        {
          pubkey: identity,
          gossip: null,
          tvu: null,
          tpu: null,
          tpuQuic: null,
          tpuForwards: null,
          tpuForwardsQuic: null,
          tpuVote: null,
          serveRepair: null,
          rpc: chain.contact.rpc,
          pubsub: chain.contact.pubsub,
          version: SOLANA_CORE_VERSION,
          featureSet: FEATURE_SET,
          shredVersion: shredVersion(chain.genesisHash),
        },
      ];
    },

    getLeaderSchedule: (p) => {
      const ps = list(p);
      let slot: number | undefined;
      let cfg: Record<string, unknown> | undefined;
      const first = ps[0];
      if (typeof first === 'number' || typeof first === 'bigint') slot = u64Param(first, 0, 2);
      else if (first !== undefined && first !== null) {
        if (typeof first !== 'object' || Array.isArray(first)) {
          throw serdeError('data did not match any variant of untagged enum RpcLeaderScheduleConfigWrapper');
        }
        cfg = first as Record<string, unknown>;
      }
      cfg ??= structParam(ps[1], 'RpcLeaderScheduleConfig');
      const only = identityFilter(cfg);
      const bankSlot = clock.commitmentSlot(commitmentOf(cfg));
      const epoch = epochs.epochOf(slot ?? bankSlot);
      // A schedule is known up to one epoch past the root's, as agave's leader schedule cache.
      if (epoch > epochs.epochOf(clock.commitmentSlot('finalized')) + 1) return null;
      if (only !== undefined && only !== identity) return {};
      return { [identity]: schedule() };
    },

    getBlockProduction: (p) => {
      const cfg = structParam(list(p)[0], 'RpcBlockProductionConfig');
      const only = identityFilter(cfg);
      const bankSlot = clock.commitmentSlot(commitmentOf(cfg));
      let firstSlot = epochs.firstSlotOf(epochs.epochOf(bankSlot));
      let lastSlot = bankSlot;
      if (cfg.range !== undefined && cfg.range !== null) {
        const range = structParam(cfg.range, 'RpcBlockProductionConfigRange');
        if (range.firstSlot === undefined) throw serdeError('missing field `firstSlot`');
        firstSlot = u64Param(range.firstSlot, 0, 1);
        lastSlot = range.lastSlot === undefined || range.lastSlot === null ? bankSlot : u64Param(range.lastSlot, 0, 1);
        if (lastSlot < firstSlot) throw paramError(`lastSlot, ${lastSlot}, cannot be less than firstSlot, ${firstSlot}`);
      }
      const oldest = Math.max(0, bankSlot + 1 - SLOT_HISTORY_ENTRIES);
      if (firstSlot < oldest) throw paramError(`firstSlot, ${firstSlot}, is too small; min ${oldest}`);
      if (lastSlot > bankSlot) throw paramError(`lastSlot, ${lastSlot}, is too large; max ${bankSlot}`);
      // devchain leads every slot and never skips one: as many blocks as leader slots.
      const slots = lastSlot - firstSlot + 1;
      const byIdentity = only === undefined || only === identity ? { [identity]: [slots, slots] } : {};
      return { context: rpcContext(bankSlot), value: { byIdentity, range: { firstSlot, lastSlot } } };
    },

    // The commitment cache counts the stake of vote accounts that voted on a block; devchain
    // has no staked vote account, so a node in its state has no entry for any slot.
    getBlockCommitment: (p) => {
      u64Param(list(p)[0], 0, 1);
      return { commitment: null, totalStake: 0 };
    },

    getRecentPerformanceSamples: (p) => {
      const v = list(p)[0];
      const limit = v === undefined || v === null ? MAX_PERF_SAMPLES : u64Param(v, 0, 1);
      if (limit > MAX_PERF_SAMPLES) throw paramError(`Invalid limit; max ${MAX_PERF_SAMPLES}`);
      return chain.perf.recent(limit);
    },
  };
}
