import { LAMPORTS_PER_SOL, PublicKey, Transaction, TransactionInstruction, sendAndConfirmTransaction } from '@solana/web3.js';
import type { KeyedAccountInfo, Logs } from '@solana/web3.js';
import { decodeSubscription, findSubscriptionAddress, subscribeInstruction } from '@agenthost/subscription-program';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestChain } from './helpers.ts';
import type { TestChain } from './helpers.ts';

let t: TestChain;
let programId: PublicKey;
let treasury: PublicKey;

beforeAll(async () => {
  t = await startTestChain();
  const cfg = (await t.rpc('devchain_getConfig')).result;
  programId = new PublicKey(cfg.programId);
  treasury = new PublicKey(cfg.treasury);
});
afterAll(async () => {
  await t.close();
});

/** Resolves with the first callback argument that passes `accept`. */
function waitFor<T>(register: (cb: (v: T) => void) => number, accept: (v: T) => boolean): { done: Promise<T>; id: Promise<number> } {
  let resolve!: (v: T) => void;
  const done = new Promise<T>((r) => (resolve = r));
  const id = Promise.resolve(register((v) => accept(v) && resolve(v)));
  return { done, id };
}

/**
 * web3.js v1 returns a listener id before the server has the subscription, and a change made before then is
 * never notified: wait until every subscription of the connection is acknowledged (its state, kept inside).
 */
async function subscribed(conn: typeof t.conn): Promise<void> {
  const subs = () => Object.values((conn as unknown as { _subscriptionsByHash: Record<string, { state: string }> })._subscriptionsByHash);
  for (let i = 0; i < 400; i++) {
    if (subs().length && subs().every((x) => x.state === 'subscribed')) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('the subscription was never acknowledged');
}

describe('web3.js v1 subscriptions', () => {
  it('onProgramAccountChange sees a new subscription account, with a memcmp filter on its owner', async () => {
    const owner = await t.funded(1);
    const [pda] = findSubscriptionAddress(programId, owner.publicKey);
    const watch = waitFor<KeyedAccountInfo>(
      (cb) =>
        t.conn.onProgramAccountChange(programId, cb, { commitment: 'confirmed', filters: [{ memcmp: { offset: 18, bytes: owner.publicKey.toBase58() } }] }),
      () => true,
    );
    await watch.id;
    await subscribed(t.conn);
    await sendAndConfirmTransaction(t.conn, new Transaction().add(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 })), [owner], {
      commitment: 'confirmed',
    });
    const change = await watch.done;
    expect(change.accountId.equals(pda)).toBe(true);
    expect(decodeSubscription(change.accountInfo.data)).toMatchObject({ tier: 1, isActive: true });
    await t.conn.removeProgramAccountChangeListener(await watch.id);
  });

  it('onLogs delivers the memo logs of a transaction that mentions the key', async () => {
    const payer = await t.funded(1);
    const watch = waitFor<Logs>(
      (cb) => t.conn.onLogs(payer.publicKey, cb, 'confirmed'),
      (l) => l.logs.some((m) => m.includes('hello logs')),
    );
    await watch.id;
    await subscribed(t.conn);
    const memo = new TransactionInstruction({
      programId: new PublicKey('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr'),
      keys: [{ pubkey: payer.publicKey, isSigner: true, isWritable: false }],
      data: Buffer.from('hello logs'),
    });
    const sig = await sendAndConfirmTransaction(t.conn, new Transaction().add(memo), [payer], { commitment: 'confirmed' });
    const logs = await watch.done;
    expect(logs.signature).toBe(sig);
    expect(logs.err).toBeNull();
    await t.conn.removeOnLogsListener(await watch.id);
    expect(await t.conn.getBalance(payer.publicKey, 'confirmed')).toBe(LAMPORTS_PER_SOL - 5000);
  });
});
