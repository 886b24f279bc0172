import {
  SOLANA_ERROR__JSON_RPC__INVALID_PARAMS,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_BLOCK_NOT_AVAILABLE,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_UNSUPPORTED_TRANSACTION_VERSION,
  generateKeyPairSigner,
  isSolanaError,
} from '@solana/kit';
import type { KeyPairSigner, Signature } from '@solana/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoInstruction, startKitChain, transferInstruction } from './kit.ts';
import type { KitChain } from './kit.ts';

let k: KitChain;
let payer: KeyPairSigner;
let recipient: KeyPairSigner;
/** A v0 transfer + memo, and a legacy transfer, both from payer to recipient. */
let v0: Signature;
let legacy: Signature;

const isError = (code: number) => (e: unknown) => isSolanaError(e, code as Parameters<typeof isSolanaError>[1]);

beforeAll(async () => {
  k = await startKitChain();
  payer = await k.funded(2n);
  recipient = await generateKeyPairSigner();
  v0 = await k.send(payer, [transferInstruction(payer.address, recipient.address, 100_000_000n), memoInstruction(payer.address, 'kit v0')], 0);
  legacy = await k.send(payer, [transferInstruction(payer.address, recipient.address, 1_000_000n)], 'legacy');
});
afterAll(async () => {
  await k.close();
});

describe('getTransaction', () => {
  it('returns a v0 transaction with its version when the client supports v0', async () => {
    const tx = await k.rpc.getTransaction(v0, { maxSupportedTransactionVersion: 0, commitment: 'confirmed', encoding: 'json' }).send();
    expect(tx?.version).toBe(0);
    expect(tx?.meta?.fee).toBe(5000n);
    expect(tx?.meta?.err).toBeNull();
    expect(tx?.meta?.logMessages).toContain('Program log: Memo (len 6): "kit v0"');
    const keys = tx!.transaction.message.accountKeys;
    const pre = tx!.meta!.preBalances[keys.indexOf(recipient.address)];
    const post = tx!.meta!.postBalances[keys.indexOf(recipient.address)];
    expect([pre, post]).toEqual([0n, 100_000_000n]);
    expect((tx!.transaction.message as { addressTableLookups?: unknown }).addressTableLookups).toEqual([]);
  });

  it('refuses a v0 transaction to a client that does not say it supports v0 (-32015)', async () => {
    await expect(k.rpc.getTransaction(v0, { commitment: 'confirmed', encoding: 'json' }).send()).rejects.toSatisfy(
      isError(SOLANA_ERROR__JSON_RPC__SERVER_ERROR_UNSUPPORTED_TRANSACTION_VERSION),
    );
  });

  it('labels a legacy transaction "legacy", and accepts any u8 as the highest version', async () => {
    const withVersion = await k.rpc.getTransaction(legacy, { maxSupportedTransactionVersion: 0, commitment: 'confirmed', encoding: 'json' }).send();
    expect(withVersion?.version).toBe('legacy');
    const v1 = await k.t.rpc('getTransaction', [v0, { maxSupportedTransactionVersion: 1, commitment: 'confirmed' }]);
    expect(v1.result.version).toBe(0);
    const without = await k.t.rpc('getTransaction', [legacy, { commitment: 'confirmed' }]);
    expect(without.result).not.toHaveProperty('version');
    expect((await k.t.rpc('getTransaction', [legacy, { maxSupportedTransactionVersion: 256 }])).error?.code).toBe(-32602);
  });
});

describe('blocks and time', () => {
  it('gives a block the transactions of its slot, with the same blockTime as getBlockTime and getTransaction', async () => {
    const tx = await k.rpc.getTransaction(v0, { maxSupportedTransactionVersion: 0, commitment: 'confirmed', encoding: 'json' }).send();
    const slot = tx!.slot;
    const block = await k.rpc.getBlock(slot, { maxSupportedTransactionVersion: 0, commitment: 'confirmed', transactionDetails: 'full', rewards: false }).send();
    expect(block?.transactions.map((t) => t.transaction.signatures[0])).toContain(v0);
    expect(block?.transactions.find((t) => t.transaction.signatures[0] === v0)?.version).toBe(0);
    const time = await k.rpc.getBlockTime(slot).send();
    expect(time).toBe(tx!.blockTime);
    expect(block?.blockTime).toBe(time);
    expect(block?.blockHeight).toBe(slot);
    expect(block?.parentSlot).toBe(slot - 1n);
    const parent = await k.rpc
      .getBlock(slot - 1n, { maxSupportedTransactionVersion: 0, commitment: 'confirmed', transactionDetails: 'none', rewards: false })
      .send();
    expect(block?.previousBlockhash).toBe(parent?.blockhash);
    const signatures = await k.rpc.getBlock(slot, { commitment: 'confirmed', transactionDetails: 'signatures', rewards: false }).send();
    expect(signatures?.signatures).toContain(v0);
    const accounts = await k.rpc
      .getBlock(slot, { maxSupportedTransactionVersion: 0, commitment: 'confirmed', transactionDetails: 'accounts', rewards: true })
      .send();
    const entry = accounts?.transactions.find((t) => t.transaction.signatures[0] === v0);
    expect(entry?.transaction.accountKeys[0]).toEqual({ pubkey: payer.address, signer: true, source: 'transaction', writable: true });
    expect(entry?.meta?.fee).toBe(5000n);
    expect(accounts?.rewards).toEqual([]);
  });

  it('keeps block times in order and close to the chain clock', async () => {
    const slot = await k.rpc.getSlot({ commitment: 'confirmed' }).send();
    const [early, late] = await Promise.all([k.rpc.getBlockTime(1n).send(), k.rpc.getBlockTime(slot).send()]);
    expect(late).toBeGreaterThanOrEqual(early!);
    const now = (await k.t.rpc('devchain_getClock')).result.unixTimestamp;
    expect(Math.abs(Number(late) - now)).toBeLessThanOrEqual(2);
  });

  it('answers a block or time that does not exist yet with -32004', async () => {
    const future = (await k.rpc.getSlot({ commitment: 'processed' }).send()) + 1000n;
    await expect(k.rpc.getBlockTime(future).send()).rejects.toSatisfy(isError(SOLANA_ERROR__JSON_RPC__SERVER_ERROR_BLOCK_NOT_AVAILABLE));
    await expect(k.rpc.getBlock(future, { commitment: 'confirmed' }).send()).rejects.toSatisfy(
      isError(SOLANA_ERROR__JSON_RPC__SERVER_ERROR_BLOCK_NOT_AVAILABLE),
    );
  });

  it('refuses a block holding a v0 transaction without maxSupportedTransactionVersion, and processed commitment', async () => {
    const { slot } = (await k.rpc.getTransaction(v0, { maxSupportedTransactionVersion: 0, commitment: 'confirmed', encoding: 'json' }).send())!;
    await expect(k.rpc.getBlock(slot, { commitment: 'confirmed' }).send()).rejects.toSatisfy(
      isError(SOLANA_ERROR__JSON_RPC__SERVER_ERROR_UNSUPPORTED_TRANSACTION_VERSION),
    );
    await expect(k.rpc.getBlock(slot, { commitment: 'processed' as 'confirmed' }).send()).rejects.toSatisfy(isError(SOLANA_ERROR__JSON_RPC__INVALID_PARAMS));
  });

  it('describes an epoch schedule that agrees with getEpochInfo', async () => {
    const schedule = await k.rpc.getEpochSchedule().send();
    expect(schedule).toEqual({ firstNormalEpoch: 0n, firstNormalSlot: 0n, leaderScheduleSlotOffset: 432_000n, slotsPerEpoch: 432_000n, warmup: false });
    const info = await k.rpc.getEpochInfo({ commitment: 'confirmed' }).send();
    expect(info.epoch * schedule.slotsPerEpoch + info.slotIndex).toBe(info.absoluteSlot);
  });

  it('lists confirmed slots with getBlocks and getBlocksWithLimit', async () => {
    expect(await k.rpc.getBlocksWithLimit(2n, 3, { commitment: 'confirmed' }).send()).toEqual([2n, 3n, 4n]);
    expect(await k.rpc.getBlocks(1n, 3n, { commitment: 'confirmed' }).send()).toEqual([1n, 2n, 3n]);
  });
});

describe('getSignaturesForAddress', () => {
  it('pages newest first with limit, before and until', async () => {
    const owner = await k.funded(1n);
    const sent: Signature[] = [];
    for (let i = 0; i < 4; i++) sent.push(await k.send(owner, [memoInstruction(owner.address, `page ${i}`)]));
    // the airdrop that funded owner is the oldest entry
    const all = await k.rpc.getSignaturesForAddress(owner.address, { commitment: 'confirmed' }).send();
    expect(all.map((s) => s.signature).slice(0, 4)).toEqual([...sent].reverse());
    expect(all).toHaveLength(5);
    expect(all[0]?.memo).toBe('[6] page 3');

    const first = await k.rpc.getSignaturesForAddress(owner.address, { commitment: 'confirmed', limit: 2 }).send();
    expect(first.map((s) => s.signature)).toEqual([sent[3], sent[2]]);
    const next = await k.rpc.getSignaturesForAddress(owner.address, { commitment: 'confirmed', limit: 2, before: first[1]!.signature }).send();
    expect(next.map((s) => s.signature)).toEqual([sent[1], sent[0]]);
    const window = await k.rpc.getSignaturesForAddress(owner.address, { commitment: 'confirmed', before: sent[3], until: sent[0] }).send();
    expect(window.map((s) => s.signature)).toEqual([sent[2], sent[1]]);
    for (const entry of window) expect(entry.blockTime).toBe(await k.rpc.getBlockTime(entry.slot).send());
  });
});
