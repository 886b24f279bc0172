import {
  SOLANA_ERROR__JSON_RPC__INVALID_PARAMS,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_NO_SNAPSHOT,
  address,
  generateKeyPairSigner,
  isSolanaError,
} from '@solana/kit';
import type { KeyPairSigner } from '@solana/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAUCET } from '../src/index.ts';
import { memoInstruction, startKitChain } from './kit.ts';
import type { KitChain } from './kit.ts';

const TOKEN_PROGRAM = address('TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA');

let k: KitChain;
let wallet: KeyPairSigner;

const isError = (code: number) => (e: unknown) => isSolanaError(e, code as Parameters<typeof isSolanaError>[1]);

beforeAll(async () => {
  k = await startKitChain();
  wallet = await k.funded(1n);
});
afterAll(async () => {
  await k.close();
});

describe('what a wallet asks about tokens', () => {
  it('lists no token accounts for a wallet, by program or by a mint that is not there', async () => {
    const byProgram = await k.rpc
      .getTokenAccountsByOwner(wallet.address, { programId: TOKEN_PROGRAM }, { encoding: 'jsonParsed', commitment: 'confirmed' })
      .send();
    expect(byProgram.value).toEqual([]);
    const missingMint = (await generateKeyPairSigner()).address;
    await expect(k.rpc.getTokenAccountsByOwner(wallet.address, { mint: missingMint }, { encoding: 'jsonParsed' }).send()).rejects.toSatisfy(
      isError(SOLANA_ERROR__JSON_RPC__INVALID_PARAMS),
    );
  });

  it('refuses a program that is not a token program, and a wallet as a token account, with -32602', async () => {
    await expect(
      k.rpc.getTokenAccountsByOwner(wallet.address, { programId: address('11111111111111111111111111111111') }, { encoding: 'base64' }).send(),
    ).rejects.toSatisfy(isError(SOLANA_ERROR__JSON_RPC__INVALID_PARAMS));
    const res = await k.t.rpc('getTokenAccountBalance', [wallet.address, { commitment: 'confirmed' }]);
    expect(res.error).toEqual({ code: -32602, message: 'Invalid param: not a Token account' });
    expect((await k.t.rpc('getTokenSupply', [(await generateKeyPairSigner()).address])).error?.message).toBe('Invalid param: could not find account');
  });
});

describe('what an admin tool asks about the cluster', () => {
  it('names one leader, the node identity, and no vote accounts', async () => {
    const { identity } = await k.rpc.getIdentity().send();
    expect(identity).toBe(FAUCET.publicKey.toBase58());
    expect(await k.rpc.getSlotLeader({ commitment: 'confirmed' }).send()).toBe(identity);
    expect(await k.rpc.getSlotLeaders(10n, 3).send()).toEqual([identity, identity, identity]);
    expect(await k.rpc.getVoteAccounts().send()).toEqual({ current: [], delinquent: [] });
  });

  it('counts the supply to the lamport, and burns each fee out of it', async () => {
    const before = (await k.rpc.getSupply({ commitment: 'confirmed' }).send()).value;
    expect(before.circulating).toBe(before.total);
    expect(before.nonCirculating).toBe(0n);
    const faucet = (await k.rpc.getBalance(address(FAUCET.publicKey.toBase58()), { commitment: 'confirmed' }).send()).value;
    expect(before.total).toBeGreaterThan(faucet);
    await k.send(wallet, [memoInstruction(wallet.address, 'fee')]);
    const after = (await k.rpc.getSupply({ commitment: 'confirmed' }).send()).value;
    expect(before.total - after.total).toBe(5000n);
  });

  it('ranks the largest accounts with the faucet first, and has no non-circulating ones', async () => {
    const largest = (await k.rpc.getLargestAccounts({ commitment: 'confirmed' }).send()).value;
    expect(largest[0]?.address).toBe(FAUCET.publicKey.toBase58());
    expect(largest.map((a) => a.address)).toContain(wallet.address);
    const lamports = largest.map((a) => a.lamports);
    expect(lamports).toEqual([...lamports].sort((a, b) => (a === b ? 0 : a > b ? -1 : 1)));
    expect((await k.rpc.getLargestAccounts({ filter: 'nonCirculating' }).send()).value).toEqual([]);
  });

  it('says it has no snapshot with -32008', async () => {
    await expect(k.rpc.getHighestSnapshotSlot().send()).rejects.toSatisfy(isError(SOLANA_ERROR__JSON_RPC__SERVER_ERROR_NO_SNAPSHOT));
  });
});
