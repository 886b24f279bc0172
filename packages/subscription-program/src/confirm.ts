import type { Connection, TransactionError } from '@solana/web3.js';

/**
 * Polls a transaction's status every `everyMs` until the cluster has it at `confirmed` (or `finalized`), for up to
 * `timeoutMs`: its error (null when it succeeded), or undefined if it was not confirmed in time. Each caller words
 * the outcome for its own reader (the CLI, the dashboard, the tests). Runs in the browser too: no Node timers.
 */
export async function waitConfirmed(
  connection: Pick<Connection, 'getSignatureStatuses'>,
  signature: string,
  o: { timeoutMs: number; everyMs: number },
): Promise<{ err: TransactionError | null } | undefined> {
  const deadline = Date.now() + o.timeoutMs;
  for (;;) {
    const st = (await connection.getSignatureStatuses([signature])).value[0];
    if (st?.confirmationStatus === 'confirmed' || st?.confirmationStatus === 'finalized') return { err: st.err };
    if (Date.now() > deadline) return undefined;
    await new Promise((r) => setTimeout(r, o.everyMs));
  }
}
