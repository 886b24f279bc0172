/**
 * In-memory account store (devchain keeps no state on disk: a restart is a fresh cluster).
 * Every write is kept as a version tagged with its slot, so reads at the confirmed or
 * finalized commitment see the state as of that slot, like agave's banks do.
 */

export interface Account {
  lamports: bigint;
  data: Uint8Array;
  /** base58 owner program */
  owner: string;
  executable: boolean;
  /**
   * Program-private state that is not part of the account data. Only the subscription
   * program uses it (the "cancelled" mark, since the on-chain layout is fixed).
   */
  cancelled?: boolean;
}

export const SYSTEM_PROGRAM_ID = '11111111111111111111111111111111';
export const NATIVE_LOADER_ID = 'NativeLoader1111111111111111111111111111111';
export const BPF_UPGRADEABLE_LOADER_ID = 'BPFLoaderUpgradeab1e11111111111111111111111';
export const COMPUTE_BUDGET_PROGRAM_ID = 'ComputeBudget111111111111111111111111111111';
export const MEMO_PROGRAM_ID = 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr';

/** Solana's rent: 3480 lamports per byte-year, 2 years for exemption, 128 bytes of overhead. */
export function rentExemptMinimum(dataLen: number): bigint {
  return BigInt(128 + dataLen) * 3480n * 2n;
}

export type AccountReader = (key: string) => Account | null;

interface Version {
  slot: number;
  account: Account | null;
}

export class AccountsDb {
  private readonly versions = new Map<string, Version[]>();
  /** Keys with more than one version (the only ones prune has to look at). */
  private readonly multi = new Set<string>();

  /** Latest version written at or before `slot` (default: newest). */
  get(key: string, slot = Number.POSITIVE_INFINITY): Account | null {
    const list = this.versions.get(key);
    if (!list) return null;
    for (let i = list.length - 1; i >= 0; i--) {
      const v = list[i] as Version;
      if (v.slot <= slot) return v.account;
    }
    return null;
  }

  /** Every live account as of `slot`. A full scan: devchain holds few accounts. */
  *live(slot: number): Generator<[string, Account]> {
    for (const key of this.versions.keys()) {
      const account = this.get(key, slot);
      if (account !== null) yield [key, account];
    }
  }

  *ownedBy(owner: string, slot: number): Generator<[string, Account]> {
    for (const entry of this.live(slot)) if (entry[1].owner === owner) yield entry;
  }

  reader(slot = Number.POSITIVE_INFINITY): AccountReader {
    return (key) => this.get(key, slot);
  }

  /** Writes a new version; accounts with zero lamports are deleted, as on Solana. */
  set(key: string, account: Account, slot: number): void {
    const value = account.lamports === 0n ? null : account;
    const list = this.versions.get(key);
    if (!list) {
      if (value !== null) this.versions.set(key, [{ slot, account: value }]);
      return;
    }
    const last = list[list.length - 1] as Version;
    if (last.slot === slot) last.account = value;
    else {
      list.push({ slot, account: value });
      this.multi.add(key);
    }
  }

  /** Drops versions no commitment level can see any more (older than the finalized one). */
  prune(finalizedSlot: number): void {
    for (const key of this.multi) {
      const list = this.versions.get(key);
      if (!list) {
        this.multi.delete(key);
        continue;
      }
      let keepFrom = 0;
      for (let i = list.length - 1; i >= 0; i--) {
        if ((list[i] as Version).slot <= finalizedSlot) {
          keepFrom = i;
          break;
        }
      }
      if (keepFrom > 0) list.splice(0, keepFrom);
      if (list.length === 1) {
        this.multi.delete(key);
        if (list[0]?.account === null) this.versions.delete(key);
      }
    }
  }
}
