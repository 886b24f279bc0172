import { Keypair, LAMPORTS_PER_SOL, PublicKey, SendTransactionError, Transaction, sendAndConfirmTransaction } from '@solana/web3.js';
import type { TransactionInstruction } from '@solana/web3.js';
import {
  PERIOD_SECONDS,
  ProgramErrorCode,
  SUBSCRIPTION_ACCOUNT_SIZE,
  cancelInstruction,
  decodeInstruction,
  decodeSubscription,
  depositInstruction,
  findSubscriptionAddress,
  renewInstruction,
  subscribeInstruction,
} from '@agenthost/subscription-program';
import bs58 from 'bs58';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PROGRAM_ID, DEFAULT_TREASURY } from '../src/index.ts';
import { DAY, startTestChain, waitForStatus } from './helpers.ts';
import type { TestChain } from './helpers.ts';

const PRO = 100_000_000;
const RENT = (128 + SUBSCRIPTION_ACCOUNT_SIZE) * 3480 * 2;

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

const send = (ix: TransactionInstruction, signer: Keypair) =>
  sendAndConfirmTransaction(t.conn, new Transaction().add(ix), [signer], { commitment: 'confirmed' });

/** Lands the instruction even if it fails (preflight skipped) and returns its signature. */
async function land(ix: TransactionInstruction, signer: Keypair): Promise<string> {
  const { blockhash, lastValidBlockHeight } = await t.conn.getLatestBlockhash();
  const tx = new Transaction({ feePayer: signer.publicKey, blockhash, lastValidBlockHeight }).add(ix);
  tx.sign(signer);
  const sig = await t.conn.sendRawTransaction(tx.serialize(), { skipPreflight: true });
  await waitForStatus(t.conn, sig, 'confirmed');
  return sig;
}

async function preflightError(ix: TransactionInstruction, signer: Keypair): Promise<SendTransactionError> {
  try {
    await send(ix, signer);
  } catch (e) {
    expect(e).toBeInstanceOf(SendTransactionError);
    return e as SendTransactionError;
  }
  throw new Error('expected the transaction to fail');
}

async function subscription(owner: PublicKey) {
  const [pda] = findSubscriptionAddress(programId, owner);
  const info = await t.conn.getAccountInfo(pda);
  if (!info) throw new Error('no subscription account');
  return { pda, lamports: info.lamports, ...decodeSubscription(info.data) };
}

const chainNow = async (): Promise<number> => (await t.rpc('devchain_getClock')).result.unixTimestamp;

describe('devchain config', () => {
  it('publishes program id, treasury, prices and period', async () => {
    const cfg = (await t.rpc('devchain_getConfig')).result;
    expect(cfg).toMatchObject({
      programId: DEFAULT_PROGRAM_ID,
      treasury: DEFAULT_TREASURY,
      prices: { free: 0, pro: PRO, enterprise: 500_000_000 },
      periodSeconds: 2_592_000,
      slotMs: 100,
    });
    expect(DEFAULT_PROGRAM_ID).toBe('EqK6CaU83SyiQm2uYrAZqd1SrZQbpYdR4xo6Y2jUZ3qc');
    const program = await t.conn.getAccountInfo(programId);
    expect(program?.executable).toBe(true);
  });
});

describe('subscribe', () => {
  it('creates the PDA with tier, expiry and active flag and pays the price to the treasury', async () => {
    const owner = await t.funded(2);
    const treasuryBefore = await t.conn.getBalance(treasury);
    const before = await chainNow();
    await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner);
    const after = await chainNow();

    const sub = await subscription(owner.publicKey);
    expect(sub.tier).toBe(1);
    expect(sub.isActive).toBe(true);
    expect(sub.owner.equals(owner.publicKey)).toBe(true);
    expect(sub.bump).toBe(findSubscriptionAddress(programId, owner.publicKey)[1]);
    expect(sub.expiresAt).toBeGreaterThanOrEqual(before + PERIOD_SECONDS);
    expect(sub.expiresAt).toBeLessThanOrEqual(after + PERIOD_SECONDS);
    expect(sub.lamports).toBe(RENT);
    expect((await t.conn.getAccountInfo(sub.pda))?.owner.equals(programId)).toBe(true);
    expect((await t.conn.getBalance(treasury)) - treasuryBefore).toBe(PRO);
    expect(await t.conn.getBalance(owner.publicKey)).toBe(2 * LAMPORTS_PER_SOL - PRO - RENT - 5000);
  });

  it('shows the program instruction and its signer in getTransaction', async () => {
    const owner = await t.funded(2);
    const sig = await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 2 }), owner);
    const got = await t.conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    expect(got?.meta?.err).toBeNull();
    const msg = got!.transaction.message;
    const keys = msg.staticAccountKeys;
    const ix = msg.compiledInstructions[0]!;
    expect(keys[ix.programIdIndex]?.equals(programId)).toBe(true);
    expect(decodeInstruction(ix.data)).toEqual({ name: 'subscribe', args: { tier: 2 } });
    expect(keys[ix.accountKeyIndexes[0]!]?.equals(owner.publicKey)).toBe(true);
    expect(msg.isAccountSigner(ix.accountKeyIndexes[0]!)).toBe(true);
    expect(got!.transaction.signatures[0]).toBe(sig);
    expect(got!.meta?.logMessages).toEqual(
      expect.arrayContaining([`Program ${programId.toBase58()} invoke [1]`, 'Program log: Instruction: Subscribe', `Program ${programId.toBase58()} success`]),
    );
    // the CPI transfers (account creation, price) are inner instructions
    expect(got!.meta?.innerInstructions?.[0]?.instructions).toHaveLength(2);
  });

  it('records a subscribe the owner cannot pay for as a failed transaction, fee charged', async () => {
    const owner = await t.funded(0.05);
    const preflight = await preflightError(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner);
    expect(preflight.message).toMatch(/custom program error: 0x1776/);
    expect(preflight.logs?.join('\n')).toMatch(/InsufficientFunds/);

    const sig = await land(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner);
    const got = await t.conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    expect(got?.meta?.err).toEqual({ InstructionError: [0, { Custom: ProgramErrorCode.InsufficientFunds }] });
    expect(got?.meta?.fee).toBe(5000);
    expect(await t.conn.getBalance(owner.publicKey)).toBe(0.05 * LAMPORTS_PER_SOL - 5000);
    const [pda] = findSubscriptionAddress(programId, owner.publicKey);
    expect(await t.conn.getAccountInfo(pda)).toBeNull();
    const status = (await t.conn.getSignatureStatus(sig)).value;
    expect(status?.err).toEqual({ InstructionError: [0, { Custom: 6006 }] });
  });

  it('rejects a subscription account that is not the owner PDA and an unknown tier', async () => {
    const owner = await t.funded(1);
    const ix = subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 });
    ix.keys[1]!.pubkey = Keypair.generate().publicKey;
    expect((await preflightError(ix, owner)).message).toMatch(/0x1771/);
    const bad = subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 });
    bad.data[8] = 7;
    expect((await preflightError(bad, owner)).message).toMatch(/0x1770/);
    const wrongTreasury = subscribeInstruction({ programId, owner: owner.publicKey, treasury: Keypair.generate().publicKey, tier: 1 });
    expect((await preflightError(wrongTreasury, owner)).message).toMatch(/0x1772/);
  });

  it('changes tier and restarts the period when an active subscriber picks another tier', async () => {
    const owner = await t.funded(2);
    await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner);
    t.chain.advanceClock(10 * DAY);
    const before = await chainNow();
    await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 2 }), owner);
    const sub = await subscription(owner.publicKey);
    expect(sub.tier).toBe(2);
    expect(sub.expiresAt).toBeGreaterThanOrEqual(before + PERIOD_SECONDS);
    expect(sub.expiresAt).toBeLessThanOrEqual(before + PERIOD_SECONDS + 5);
  });
});

describe('renew', () => {
  it('fails before expiry with NotExpired', async () => {
    const owner = await t.funded(2);
    await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner);
    const err = await preflightError(renewInstruction({ programId, caller: owner.publicKey, owner: owner.publicKey, treasury }), owner);
    expect(err.message).toMatch(/custom program error: 0x1777/);
    const sig = await land(renewInstruction({ programId, caller: owner.publicKey, owner: owner.publicKey, treasury }), owner);
    expect((await t.conn.getSignatureStatus(sig)).value?.err).toEqual({ InstructionError: [0, { Custom: ProgramErrorCode.NotExpired }] });
  });

  it('extends 30 days from the prepaid balance after expiry, called by anyone', async () => {
    const owner = await t.funded(2);
    const keeper = await t.funded(1);
    await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner);
    await send(depositInstruction({ programId, owner: owner.publicKey, treasury, lamports: BigInt(PRO + 1234) }), owner);
    const before = await subscription(owner.publicKey);
    expect(before.lamports).toBe(RENT + PRO + 1234);

    t.chain.advanceClock(PERIOD_SECONDS + 1);
    const treasuryBefore = await t.conn.getBalance(treasury);
    await send(renewInstruction({ programId, caller: keeper.publicKey, owner: owner.publicKey, treasury }), keeper);
    const after = await subscription(owner.publicKey);
    expect(after.expiresAt).toBe(before.expiresAt + PERIOD_SECONDS);
    expect(after.isActive).toBe(true);
    expect(after.tier).toBe(1);
    expect(after.lamports).toBe(before.lamports - PRO);
    expect((await t.conn.getBalance(treasury)) - treasuryBefore).toBe(PRO);
  });

  it('deactivates a subscription whose prepaid balance does not cover the price', async () => {
    const owner = await t.funded(2);
    await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner);
    await send(depositInstruction({ programId, owner: owner.publicKey, treasury, lamports: BigInt(PRO - 1) }), owner);
    t.chain.advanceClock(PERIOD_SECONDS + 1);
    const before = await subscription(owner.publicKey);
    const sig = await send(renewInstruction({ programId, caller: owner.publicKey, owner: owner.publicKey, treasury }), owner);
    const after = await subscription(owner.publicKey);
    expect(after.isActive).toBe(false);
    expect(after.expiresAt).toBe(before.expiresAt);
    expect(after.lamports).toBe(before.lamports);
    expect((await t.conn.getTransaction(sig, { commitment: 'confirmed' }))?.meta?.err).toBeNull();
    // nothing left to renew
    expect((await preflightError(renewInstruction({ programId, caller: owner.publicKey, owner: owner.publicKey, treasury }), owner)).message).toMatch(/0x177a/);
  });

  it('deactivates a cancelled subscription at expiry even with enough prepaid balance', async () => {
    const owner = await t.funded(2);
    await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner);
    await send(depositInstruction({ programId, owner: owner.publicKey, treasury, lamports: BigInt(3 * PRO) }), owner);
    const cancelSig = await send(cancelInstruction({ programId, owner: owner.publicKey, treasury }), owner);
    const cancelled = await subscription(owner.publicKey);
    expect(cancelled.isActive).toBe(true); // active until expires_at
    expect((await preflightError(cancelInstruction({ programId, owner: owner.publicKey, treasury }), owner)).message).toMatch(/0x1779/);

    t.chain.advanceClock(PERIOD_SECONDS + 1);
    await send(renewInstruction({ programId, caller: owner.publicKey, owner: owner.publicKey, treasury }), owner);
    const after = await subscription(owner.publicKey);
    expect(after.isActive).toBe(false);
    expect(after.lamports).toBe(cancelled.lamports); // nothing charged, nothing refunded

    // Off-chain, the cancellation is the successful cancel instruction in the PDA's history.
    const history = await t.conn.getSignaturesForAddress(cancelled.pda, {}, 'confirmed');
    const cancelEntry = history.find((h) => h.signature === cancelSig);
    expect(cancelEntry?.err).toBeNull();
    const tx = await t.conn.getTransaction(cancelSig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    expect(decodeInstruction(tx!.transaction.message.compiledInstructions[0]!.data)?.name).toBe('cancel');
  });

  it('lets a new subscribe reactivate and clear a cancellation', async () => {
    const owner = await t.funded(2);
    await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner);
    await send(cancelInstruction({ programId, owner: owner.publicKey, treasury }), owner);
    await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner);
    await send(depositInstruction({ programId, owner: owner.publicKey, treasury, lamports: BigInt(PRO) }), owner);
    const sub = await subscription(owner.publicKey);
    t.chain.advanceClock(sub.expiresAt - (await chainNow()) + 1);
    await send(renewInstruction({ programId, caller: owner.publicKey, owner: owner.publicKey, treasury }), owner);
    const after = await subscription(owner.publicKey);
    expect(after.isActive).toBe(true);
    expect(after.expiresAt).toBe(sub.expiresAt + PERIOD_SECONDS);
  });
});

describe('history of the program', () => {
  it('lists every program transaction under the program id and the PDA, newest first', async () => {
    const owner = await t.funded(2);
    const [pda] = findSubscriptionAddress(programId, owner.publicKey);
    const sigs = [
      await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 1 }), owner),
      await send(depositInstruction({ programId, owner: owner.publicKey, treasury, lamports: 1000n }), owner),
      await land(renewInstruction({ programId, caller: owner.publicKey, owner: owner.publicKey, treasury }), owner),
      await send(cancelInstruction({ programId, owner: owner.publicKey, treasury }), owner),
    ];
    const byPda = await t.conn.getSignaturesForAddress(pda, {}, 'confirmed');
    expect(byPda.map((s) => s.signature)).toEqual([...sigs].reverse());
    expect(byPda[1]?.err).toEqual({ InstructionError: [0, { Custom: ProgramErrorCode.NotExpired }] });
    const byProgram = await t.conn.getSignaturesForAddress(programId, { limit: 4 }, 'confirmed');
    expect(byProgram.map((s) => s.signature)).toEqual([...sigs].reverse());
    for (const s of byProgram) expect(bs58.decode(s.signature)).toHaveLength(64);
  });

  it('serves a finalized transaction only once it is finalized', async () => {
    const owner = await t.funded(1);
    const sig = await send(subscribeInstruction({ programId, owner: owner.publicKey, treasury, tier: 0 }), owner);
    await waitForStatus(t.conn, sig, 'finalized');
    const fin = await t.conn.getTransaction(sig, { commitment: 'finalized', maxSupportedTransactionVersion: 0 });
    expect(fin?.meta?.err).toBeNull();
    const sub = await t.conn.getAccountInfo(findSubscriptionAddress(programId, owner.publicKey)[0], 'finalized');
    expect(decodeSubscription(sub!.data).tier).toBe(0);
  });
});
