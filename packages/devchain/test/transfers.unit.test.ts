import {
  Keypair,
  LAMPORTS_PER_SOL,
  SendTransactionError,
  SystemProgram,
  Transaction,
  TransactionMessage,
  VersionedTransaction,
  sendAndConfirmTransaction,
} from '@solana/web3.js';
import bs58 from 'bs58';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestChain, waitForStatus } from './helpers.ts';
import type { TestChain } from './helpers.ts';

let t: TestChain;
beforeAll(async () => {
  t = await startTestChain();
});
afterAll(async () => {
  await t.close();
});

async function signedTransfer(from: Keypair, to: Keypair, lamports: number): Promise<Transaction> {
  const { blockhash, lastValidBlockHeight } = await t.conn.getLatestBlockhash();
  const tx = new Transaction({ feePayer: from.publicKey, blockhash, lastValidBlockHeight });
  tx.add(SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to.publicKey, lamports }));
  tx.sign(from);
  return tx;
}

async function sendError(raw: Uint8Array | Buffer, skipPreflight = false): Promise<SendTransactionError> {
  try {
    await t.conn.sendRawTransaction(raw, { skipPreflight });
  } catch (e) {
    expect(e).toBeInstanceOf(SendTransactionError);
    return e as SendTransactionError;
  }
  throw new Error('expected sendRawTransaction to fail');
}

describe('airdrop and balances', () => {
  it('credits an airdrop that confirms through the websocket', async () => {
    const kp = Keypair.generate();
    const sig = await t.conn.requestAirdrop(kp.publicKey, 3 * LAMPORTS_PER_SOL);
    const latest = await t.conn.getLatestBlockhash();
    const res = await t.conn.confirmTransaction({ signature: sig, ...latest }, 'confirmed');
    expect(res.value.err).toBeNull();
    expect(await t.conn.getBalance(kp.publicKey)).toBe(3 * LAMPORTS_PER_SOL);
  });

  it('reports zero for an unknown account and null account info', async () => {
    const kp = Keypair.generate();
    expect(await t.conn.getBalance(kp.publicKey)).toBe(0);
    expect(await t.conn.getAccountInfo(kp.publicKey)).toBeNull();
  });

  it('computes rent exemption like Solana', async () => {
    expect(await t.conn.getMinimumBalanceForRentExemption(0)).toBe(890_880);
    expect(await t.conn.getMinimumBalanceForRentExemption(51)).toBe((128 + 51) * 3480 * 2);
  });
});

describe('System Program transfer', () => {
  it('moves lamports and charges 5000 lamports per signature with sendAndConfirmTransaction', async () => {
    const from = await t.funded(2);
    const to = Keypair.generate();
    const tx = new Transaction().add(SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to.publicKey, lamports: LAMPORTS_PER_SOL }));
    const sig = await sendAndConfirmTransaction(t.conn, tx, [from], { commitment: 'confirmed' });
    expect(await t.conn.getBalance(to.publicKey)).toBe(LAMPORTS_PER_SOL);
    expect(await t.conn.getBalance(from.publicKey)).toBe(LAMPORTS_PER_SOL - 5000);

    const got = await t.conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    expect(got?.meta?.err).toBeNull();
    expect(got?.meta?.fee).toBe(5000);
    expect(got?.meta?.preBalances.slice(0, 2)).toEqual([2 * LAMPORTS_PER_SOL, 0]);
    expect(got?.meta?.postBalances.slice(0, 2)).toEqual([LAMPORTS_PER_SOL - 5000, LAMPORTS_PER_SOL]);
    expect(got?.transaction.message.staticAccountKeys[0]?.equals(from.publicKey)).toBe(true);
    expect(got?.version).toBe('legacy');

    const parsed = await t.conn.getParsedTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    const ix = parsed?.transaction.message.instructions[0];
    expect(ix && 'parsed' in ix ? ix.parsed : null).toEqual({
      type: 'transfer',
      info: { source: from.publicKey.toBase58(), destination: to.publicKey.toBase58(), lamports: LAMPORTS_PER_SOL },
    });
  });

  it('records a transfer exceeding the balance as a failed transaction when preflight is skipped', async () => {
    const from = await t.funded(1);
    const to = Keypair.generate();
    const tx = await signedTransfer(from, to, 5 * LAMPORTS_PER_SOL);
    await expect(sendError(tx.serialize())).resolves.toBeInstanceOf(SendTransactionError);
    const sig = await t.conn.sendRawTransaction(tx.serialize(), { skipPreflight: true });
    const status = await waitForStatus(t.conn, sig, 'confirmed');
    expect(status.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
    const got = await t.conn.getTransaction(sig, { commitment: 'confirmed' });
    expect(got?.meta?.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
    expect(got?.meta?.logMessages).toContain(`Transfer: insufficient lamports ${LAMPORTS_PER_SOL - 5000}, need ${5 * LAMPORTS_PER_SOL}`);
    expect(await t.conn.getBalance(from.publicKey)).toBe(LAMPORTS_PER_SOL - 5000);
    expect(await t.conn.getBalance(to.publicKey)).toBe(0);
  });

  it('rejects a transfer that would leave a new account below rent exemption', async () => {
    const from = await t.funded(1);
    const err = await sendError((await signedTransfer(from, Keypair.generate(), 1000)).serialize());
    expect(err.message).toMatch(/insufficient funds for rent/);
  });

  it('accepts a v0 transaction and serves it only to clients that support versions', async () => {
    const from = await t.funded(1);
    const to = Keypair.generate();
    const { blockhash } = await t.conn.getLatestBlockhash();
    const message = new TransactionMessage({
      payerKey: from.publicKey,
      recentBlockhash: blockhash,
      instructions: [SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to.publicKey, lamports: LAMPORTS_PER_SOL / 2 })],
    }).compileToV0Message();
    const vtx = new VersionedTransaction(message);
    vtx.sign([from]);
    const sig = await t.conn.sendTransaction(vtx);
    await waitForStatus(t.conn, sig, 'confirmed');
    expect(await t.conn.getBalance(to.publicKey)).toBe(LAMPORTS_PER_SOL / 2);
    const got = await t.conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    expect(got?.version).toBe(0);
    await expect(t.conn.getTransaction(sig, { commitment: 'confirmed' } as never)).rejects.toThrow(/maxSupportedTransactionVersion/);
  });
});

describe('transaction validation', () => {
  it('rejects a transaction with a corrupted signature', async () => {
    const from = await t.funded(1);
    const raw = (await signedTransfer(from, Keypair.generate(), 1_000_000)).serialize();
    raw[5] = (raw[5] as number) ^ 0x01; // inside the first signature
    const err = await sendError(raw);
    expect(err.message).toMatch(/Transaction signature verification failure/);
    const err2 = await sendError(raw, true);
    expect(err2.message).toMatch(/signature verification failure/);
  });

  it('rejects a message altered after signing', async () => {
    const from = await t.funded(1);
    const raw = (await signedTransfer(from, Keypair.generate(), 1_000_000)).serialize();
    raw[raw.length - 1] = (raw[raw.length - 1] as number) ^ 0x01; // lamports of the transfer
    expect((await sendError(raw)).message).toMatch(/signature verification failure/);
  });

  it('rejects a transaction missing a required signer', async () => {
    const from = await t.funded(1);
    const other = Keypair.generate();
    const { blockhash } = await t.conn.getLatestBlockhash();
    const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash });
    tx.add(SystemProgram.transfer({ fromPubkey: other.publicKey, toPubkey: from.publicKey, lamports: 1 }));
    tx.partialSign(from);
    const raw = tx.serialize({ requireAllSignatures: false });
    expect((await sendError(raw)).message).toMatch(/signature verification failure/);
  });

  it('rejects an unknown blockhash', async () => {
    const from = await t.funded(1);
    const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: Keypair.generate().publicKey.toBase58() });
    tx.add(SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: Keypair.generate().publicKey, lamports: LAMPORTS_PER_SOL / 10 }));
    tx.sign(from);
    const err = await sendError(tx.serialize());
    expect(err.message).toMatch(/Blockhash not found/);
    expect((await sendError(tx.serialize(), true)).message).toMatch(/Blockhash not found/);
  });

  it('rejects a replay of an already processed transaction', async () => {
    const from = await t.funded(1);
    const raw = (await signedTransfer(from, Keypair.generate(), LAMPORTS_PER_SOL / 10)).serialize();
    const sig = await t.conn.sendRawTransaction(raw);
    expect(sig).toBe(bs58.encode(raw.subarray(1, 65)));
    expect((await sendError(raw)).message).toMatch(/already been processed/);
  });

  it('rejects a fee payer without funds and does not record the transaction', async () => {
    const poor = Keypair.generate();
    const raw = (await signedTransfer(poor, Keypair.generate(), 1)).serialize();
    const err = await sendError(raw, true);
    expect(err.message).toMatch(/no record of a prior credit/);
    const { value } = await t.conn.getSignatureStatus(bs58.encode(raw.subarray(1, 65)), { searchTransactionHistory: true });
    expect(value).toBeNull();
  });
});

describe('commitment', () => {
  it('moves a transaction from processed to confirmed to finalized', async () => {
    const from = await t.funded(1);
    const tx = await signedTransfer(from, Keypair.generate(), LAMPORTS_PER_SOL / 10);
    const sig = bs58.encode(tx.signature as Buffer);
    const batch = async (calls: Array<[string, unknown[]]>) => {
      const res = await fetch(t.chain.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(calls.map(([method, params], id) => ({ jsonrpc: '2.0', id, method, params }))),
      });
      return ((await res.json()) as Array<{ id: number; result: any }>).sort((a, b) => a.id - b.id).map((r) => r.result);
    };
    const statusCalls: Array<[string, unknown[]]> = [
      ['getSignatureStatuses', [[sig]]],
      ['getTransaction', [sig, { commitment: 'confirmed' }]],
      ['getTransaction', [sig, { commitment: 'finalized' }]],
    ];
    // Sent and queried in one batch: no slot can pass in between.
    const [, first, confirmedTx, finalizedTx] = await batch([
      ['sendTransaction', [tx.serialize().toString('base64'), { encoding: 'base64', preflightCommitment: 'confirmed' }]],
      ...statusCalls,
    ]);
    expect(first.value[0]).toMatchObject({ confirmationStatus: 'processed', confirmations: 0, err: null });
    expect(confirmedTx).toBeNull();
    expect(finalizedTx).toBeNull();

    const seen = new Set<string>();
    for (let i = 0; i < 500; i++) {
      const [st, conf, fin] = await batch(statusCalls);
      const s = st.value[0];
      seen.add(s.confirmationStatus);
      if (s.confirmationStatus === 'processed') expect(conf).toBeNull();
      if (s.confirmationStatus === 'confirmed') {
        expect(s.confirmations).toBeGreaterThanOrEqual(1);
        expect(conf).not.toBeNull();
        expect(fin).toBeNull();
      }
      if (s.confirmationStatus === 'finalized') {
        expect(s.confirmations).toBeNull();
        expect(fin?.slot).toBe(s.slot);
        break;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(seen.has('confirmed')).toBe(true);
    expect(seen.has('finalized')).toBe(true);
  });

  it('shows balances at the requested commitment', async () => {
    const kp = Keypair.generate();
    const raw = await fetch(t.chain.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'requestAirdrop', params: [kp.publicKey.toBase58(), LAMPORTS_PER_SOL] },
        { jsonrpc: '2.0', id: 2, method: 'getBalance', params: [kp.publicKey.toBase58(), { commitment: 'processed' }] },
        { jsonrpc: '2.0', id: 3, method: 'getBalance', params: [kp.publicKey.toBase58(), { commitment: 'confirmed' }] },
      ]),
    });
    const [, processed, confirmed] = ((await raw.json()) as Array<{ id: number; result: any }>).sort((a, b) => a.id - b.id);
    expect(processed?.result.value).toBe(LAMPORTS_PER_SOL);
    expect(confirmed?.result.value).toBe(0);
  });

  it('notifies account changes over the websocket', async () => {
    const kp = Keypair.generate();
    let id: number | undefined;
    const changed = new Promise<number>((resolve) => {
      id = t.conn.onAccountChange(kp.publicKey, (info) => resolve(info.lamports), { commitment: 'confirmed' });
    });
    // The subscription is set up asynchronously: keep changing the account until it is seen.
    let seen: number | undefined;
    void changed.then((l) => (seen = l));
    for (let i = 0; i < 20 && seen === undefined; i++) {
      await t.conn.requestAirdrop(kp.publicKey, LAMPORTS_PER_SOL);
      await Promise.race([changed, new Promise((r) => setTimeout(r, 250))]);
    }
    await t.conn.removeAccountChangeListener(id as number);
    expect(seen).toBeGreaterThan(0);
    expect((seen as number) % LAMPORTS_PER_SOL).toBe(0);
  });
});

describe('history', () => {
  it('lists signatures for an address newest first with before/until/limit', async () => {
    const from = await t.funded(2);
    const sigs: string[] = [];
    for (let i = 0; i < 4; i++) {
      const tx = new Transaction().add(
        SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: Keypair.generate().publicKey, lamports: LAMPORTS_PER_SOL / 10 }),
      );
      sigs.push(await sendAndConfirmTransaction(t.conn, tx, [from], { commitment: 'confirmed' }));
    }
    const all = await t.conn.getSignaturesForAddress(from.publicKey, {}, 'confirmed');
    expect(all.map((s) => s.signature).slice(0, 4)).toEqual([...sigs].reverse());
    expect(all).toHaveLength(5); // + the airdrop
    const limited = await t.conn.getSignaturesForAddress(from.publicKey, { limit: 2 }, 'confirmed');
    expect(limited.map((s) => s.signature)).toEqual([sigs[3], sigs[2]]);
    const before = await t.conn.getSignaturesForAddress(from.publicKey, { before: sigs[2], until: sigs[0] }, 'confirmed');
    expect(before.map((s) => s.signature)).toEqual([sigs[1]]);
  });
});
