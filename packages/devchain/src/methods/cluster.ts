/**
 * Cluster-level answers. devchain is one node with no stake, votes or snapshots, so these
 * say what a real node would say about such a cluster: it leads every slot, has no vote
 * accounts, and all lamports circulate.
 */
import type { Chain } from '../chain.ts';
import { FAUCET } from '../chain.ts';
import { parsePubkey } from '../encoding.ts';
import { RpcCode, RpcError, invalidParams } from '../errors.ts';
import type { Methods } from '../rpc.ts';
import { bool, cfgAt, list, rpcContext, slotFor, uint } from './params.ts';
import { FEATURE_SET, SOLANA_CORE_VERSION } from './params.ts';

/** agave's MAX_GET_SLOT_LEADERS */
const MAX_SLOT_LEADERS = 5000;
/** getLargestAccounts answers the top 20, as agave */
const LARGEST_ACCOUNTS = 20;

export function clusterMethods(chain: Chain): Methods {
  const { clock, ledger, accounts } = chain;
  const identity = FAUCET.publicKey.toBase58();
  return {
    getHealth: () => 'ok',
    getVersion: () => ({ 'feature-set': FEATURE_SET, 'solana-core': SOLANA_CORE_VERSION }),
    getGenesisHash: () => chain.genesisHash,
    getIdentity: () => ({ identity }),
    getTransactionCount: (p) => (slotFor(clock, cfgAt(list(p), 0)), ledger.transactionCount),
    getRecentPrioritizationFees: (p) => {
      const ps = list(p);
      if (ps[0] !== undefined && ps[0] !== null) {
        if (!Array.isArray(ps[0])) throw invalidParams('addresses must be an array');
        ps[0].forEach((a) => parsePubkey(a, 'address'));
      }
      return [];
    },
    getSlotLeader: (p) => (slotFor(clock, cfgAt(list(p), 0)), identity),
    getSlotLeaders: (p) => {
      const ps = list(p);
      uint(ps[0], 'start slot');
      const limit = uint(ps[1], 'limit');
      if (limit > MAX_SLOT_LEADERS) throw invalidParams(`Invalid limit; max ${MAX_SLOT_LEADERS}`);
      return Array.from({ length: limit }, () => identity);
    },
    getMaxRetransmitSlot: () => clock.slot,
    getMaxShredInsertSlot: () => clock.slot,
    getHighestSnapshotSlot: () => {
      throw new RpcError(RpcCode.NoSnapshot, 'No snapshot');
    },
    getVoteAccounts: (p) => (slotFor(clock, cfgAt(list(p), 0)), { current: [], delinquent: [] }),
    getLargestAccounts: (p) => {
      const cfg = cfgAt(list(p), 0);
      if (cfg.filter !== undefined && cfg.filter !== null && cfg.filter !== 'circulating' && cfg.filter !== 'nonCirculating') {
        throw invalidParams('filter must be "circulating" or "nonCirculating"');
      }
      const slot = slotFor(clock, cfg);
      if (cfg.filter === 'nonCirculating') return { context: rpcContext(slot), value: [] };
      const top = [...accounts.live(slot)]
        .sort(([, a], [, b]) => (a.lamports === b.lamports ? 0 : a.lamports > b.lamports ? -1 : 1))
        .slice(0, LARGEST_ACCOUNTS)
        .map(([address, account]) => ({ address, lamports: account.lamports }));
      return { context: rpcContext(slot), value: top };
    },
    getSupply: (p) => {
      const cfg = cfgAt(list(p), 0);
      bool(cfg.excludeNonCirculatingAccountsList, 'excludeNonCirculatingAccountsList', false);
      const slot = slotFor(clock, cfg);
      let total = 0n;
      for (const [, account] of accounts.live(slot)) total += account.lamports;
      return { context: rpcContext(slot), value: { circulating: total, nonCirculating: 0n, nonCirculatingAccounts: [], total } };
    },
  };
}
