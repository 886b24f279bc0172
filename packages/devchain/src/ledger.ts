/** In-memory transaction history: records by signature and per-address indexes. */
import type { TransactionError } from './errors.ts';
import type { InnerInstructions } from './runtime.ts';
import type { DecodedTransaction } from './transaction.ts';

export interface TransactionRecord {
  signature: string;
  /** The block it landed in; its blockTime is the clock's time of that slot. */
  slot: number;
  tx: DecodedTransaction;
  err: TransactionError | null;
  fee: bigint;
  preBalances: bigint[];
  postBalances: bigint[];
  logs: string[];
  innerInstructions: InnerInstructions[];
  unitsConsumed: number;
  /** "[len] text" of memo instructions, as getSignaturesForAddress reports them. */
  memo: string | null;
}

export class Ledger {
  private readonly bySignature = new Map<string, TransactionRecord>();
  private readonly byAddress = new Map<string, TransactionRecord[]>();
  private readonly bySlot = new Map<number, TransactionRecord[]>();
  private count = 0;

  add(record: TransactionRecord): void {
    this.bySignature.set(record.signature, record);
    this.count++;
    const block = this.bySlot.get(record.slot);
    if (block) block.push(record);
    else this.bySlot.set(record.slot, [record]);
    for (const key of record.tx.accountKeys) {
      let list = this.byAddress.get(key);
      if (!list) this.byAddress.set(key, (list = []));
      list.push(record);
    }
  }

  get(signature: string): TransactionRecord | undefined {
    return this.bySignature.get(signature);
  }

  /** The transactions of one block, in the order they landed. */
  inSlot(slot: number): readonly TransactionRecord[] {
    return this.bySlot.get(slot) ?? [];
  }

  has(signature: string): boolean {
    return this.bySignature.has(signature);
  }

  get transactionCount(): number {
    return this.count;
  }

  /**
   * Newest first, only records at or below `maxSlot`. `before`: start after this signature;
   * `until`: stop before this signature (both exclusive).
   */
  history(address: string, opts: { maxSlot: number; limit: number; before?: string; until?: string }): TransactionRecord[] {
    const list = this.byAddress.get(address) ?? [];
    const out: TransactionRecord[] = [];
    let started = opts.before === undefined;
    for (let i = list.length - 1; i >= 0 && out.length < opts.limit; i--) {
      const r = list[i] as TransactionRecord;
      if (!started) {
        if (r.signature === opts.before) started = true;
        continue;
      }
      if (r.signature === opts.until) break;
      if (r.slot > opts.maxSlot) continue;
      out.push(r);
    }
    return out;
  }
}
