/**
 * The slotsUpdatesNotification events of one tick, shaped as agave's SlotUpdate (tagged by
 * `type`, `timestamp` in unix ms). When slot N opens, the leader has finished N-1: its shreds
 * are complete, its bank is frozen, the bank of N is created on it, N-1 is confirmed at once
 * (devchain's confirmed = processed - 1) and one more slot is rooted. A one-node cluster
 * receives no shreds from others, so there is no `firstShredReceived`; no slot dies, so no `dead`.
 */
import type { Chain } from './chain.ts';

export function slotUpdates(chain: Chain, slot: number): object[] {
  const { clock, ledger } = chain;
  const done = slot - 1;
  const timestamp = clock.nowMs();
  const transactions = ledger.inSlot(done);
  const failed = transactions.filter((r) => r.err !== null).length;
  return [
    { type: 'completed', slot: done, timestamp },
    {
      type: 'frozen',
      slot: done,
      timestamp,
      // devchain puts each transaction in an entry of its own.
      stats: {
        numTransactionEntries: transactions.length,
        numSuccessfulTransactions: transactions.length - failed,
        numFailedTransactions: failed,
        maxTransactionsPerEntry: transactions.length > 0 ? 1 : 0,
      },
      // devchain keeps no bank hash apart from the block's hash.
      hash: clock.blockhashOf(done),
    },
    { type: 'createdBank', slot, parent: done, timestamp },
    { type: 'optimisticConfirmation', slot: clock.commitmentSlot('confirmed'), timestamp },
    { type: 'root', slot: clock.commitmentSlot('finalized'), timestamp },
  ];
}
