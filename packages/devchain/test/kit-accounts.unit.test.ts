import {
  SOLANA_ERROR__JSON_RPC__INVALID_PARAMS,
  SOLANA_ERROR__JSON_RPC__METHOD_NOT_FOUND,
  address,
  assertAccountExists,
  decodeAccount,
  fetchEncodedAccount,
  generateKeyPairSigner,
  getBase58Encoder,
  getBase64Encoder,
  isSolanaError,
} from '@solana/kit';
import type { Address, Base58EncodedBytes, KeyPairSigner } from '@solana/kit';
import { SUBSCRIPTION_ACCOUNT_SIZE, accountDiscriminator, findSubscriptionAddress, subscribeInstruction } from '@agenthost/subscription-program';
import { PublicKey, SystemProgram } from '@solana/web3.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAUCET } from '../src/index.ts';
import { fromWeb3, startKitChain, subscriptionCodec, unzstd } from './kit.ts';
import type { KitChain } from './kit.ts';

let k: KitChain;
let programId: Address;
let treasury: Address;
const subscribers: Array<{ owner: KeyPairSigner; pda: Address; tier: number }> = [];
/** A 200-byte account owned by the subscription program that is not a subscription. */
let other: KeyPairSigner;

const pk = (a: Address) => new PublicKey(a);

async function subscribe(owner: KeyPairSigner, tier: number): Promise<Address> {
  const ix = subscribeInstruction({ programId: pk(programId), owner: pk(owner.address), treasury: pk(treasury), tier });
  await k.send(owner, [fromWeb3(ix)]);
  return address(findSubscriptionAddress(pk(programId), pk(owner.address))[0].toBase58());
}

beforeAll(async () => {
  k = await startKitChain();
  const cfg = (await k.t.rpc('devchain_getConfig')).result;
  programId = address(cfg.programId);
  treasury = address(cfg.treasury);
  for (const tier of [1, 1, 0]) {
    const owner = await k.funded(2n);
    subscribers.push({ owner, tier, pda: await subscribe(owner, tier) });
  }
  const payer = subscribers[0]!.owner;
  other = await generateKeyPairSigner();
  const create = SystemProgram.createAccount({
    fromPubkey: pk(payer.address),
    newAccountPubkey: pk(other.address),
    lamports: (128 + 200) * 3480 * 2,
    space: 200,
    programId: pk(programId),
  });
  const ix = fromWeb3(create);
  // the new account signs too: hand kit its signer on that account meta
  await k.send(payer, [{ ...ix, accounts: ix.accounts!.map((a) => (a.address === other.address ? { ...a, signer: other } : a)) }]);
});
afterAll(async () => {
  await k.close();
});

describe('exact u64 numbers', () => {
  it('sends rentEpoch as u64::MAX exactly and balances to the lamport', async () => {
    const faucet = address(FAUCET.publicKey.toBase58());
    const raw = await (
      await fetch(k.t.chain.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getAccountInfo', params: [faucet, { encoding: 'base64', commitment: 'confirmed' }] }),
      })
    ).text();
    expect(raw).toContain('"rentEpoch":18446744073709551615');
    const { value } = await k.rpc.getAccountInfo(faucet, { encoding: 'base64', commitment: 'confirmed' }).send();
    // kit 8 dropped rentEpoch from its types (deprecated upstream) but parses it as a bigint
    expect((value as { rentEpoch?: bigint } | null)?.rentEpoch).toBe(18446744073709551615n);
    // 4,000,000 SOL at genesis, minus the airdrops of beforeAll (2 SOL + 5000 fee each, three times)
    const balance = (await k.rpc.getBalance(faucet, { commitment: 'confirmed' }).send()).value;
    expect(balance).toBe(4_000_000_000_000_000n - 3n * (2_000_000_000n + 5000n));
    expect(raw).toContain(`"lamports":${value?.lamports}`);
  });
});

describe('account encodings', () => {
  it('serves the same bytes in base58, base64, base64+zstd and the legacy binary shape', async () => {
    const { pda, owner, tier } = subscribers[0]!;
    const expected = { tier, isActive: true, owner: owner.address };
    const base64 = (await k.rpc.getAccountInfo(pda, { encoding: 'base64' }).send()).value!;
    const bytes = getBase64Encoder().encode(base64.data[0]);
    expect(subscriptionCodec.decode(bytes)).toMatchObject(expected);
    expect(base64.space).toBe(BigInt(SUBSCRIPTION_ACCOUNT_SIZE));
    expect(base64.owner).toBe(programId);

    const base58 = (await k.rpc.getAccountInfo(pda, { encoding: 'base58' }).send()).value!;
    expect(base58.data[1]).toBe('base58');
    expect(getBase58Encoder().encode(base58.data[0])).toEqual(bytes);

    const zstd = (await k.rpc.getAccountInfo(pda, { encoding: 'base64+zstd' }).send()).value!;
    expect(zstd.data[1]).toBe('base64+zstd');
    expect(unzstd(zstd.data[0])).toEqual(bytes);

    // no encoding: agave's legacy "binary" answer, a bare base58 string
    const legacy = (await k.rpc.getAccountInfo(pda).send()).value!;
    expect(typeof legacy.data).toBe('string');
    expect(getBase58Encoder().encode(legacy.data)).toEqual(bytes);
  });

  it('decodes through fetchEncodedAccount and kit codecs', async () => {
    const { pda, owner } = subscribers[1]!;
    const account = decodeAccount(await fetchEncodedAccount(k.rpc, pda), subscriptionCodec);
    assertAccountExists(account);
    expect(account.data.owner).toBe(owner.address);
    expect(account.data.discriminator).toEqual(accountDiscriminator());
    expect(account.programAddress).toBe(programId);
    const missing = await fetchEncodedAccount(k.rpc, (await generateKeyPairSigner()).address);
    expect(missing.exists).toBe(false);
  });

  it('parses the upgradeable program account in jsonParsed and falls back to base64 for the rest', async () => {
    const program = (await k.rpc.getAccountInfo(programId, { encoding: 'jsonParsed' }).send()).value!;
    expect(program.executable).toBe(true);
    expect(program.data).toMatchObject({ program: 'bpf-upgradeable-loader', parsed: { type: 'program' }, space: 36n });
    const sub = (await k.rpc.getAccountInfo(subscribers[0]!.pda, { encoding: 'jsonParsed' }).send()).value!;
    expect(Array.isArray(sub.data) && sub.data[1]).toBe('base64');
  });

  it('compresses with real zstd, slices data and refuses base58 above 128 bytes', async () => {
    const zstd = (await k.rpc.getAccountInfo(other.address, { encoding: 'base64+zstd' }).send()).value!;
    expect(getBase64Encoder().encode(zstd.data[0]).length).toBeLessThan(200);
    expect(unzstd(zstd.data[0])).toEqual(new Uint8Array(200));
    const sliced = (await k.rpc.getAccountInfo(subscribers[0]!.pda, { encoding: 'base64', dataSlice: { offset: 8, length: 1 } }).send()).value!;
    expect(getBase64Encoder().encode(sliced.data[0])).toEqual(Uint8Array.of(1));
    await expect(k.rpc.getAccountInfo(other.address, { encoding: 'base58' }).send()).rejects.toSatisfy((e) =>
      isSolanaError(e, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS),
    );
  });
});

describe('getProgramAccounts', () => {
  const owned = async (filters: Parameters<KitChain['rpc']['getProgramAccounts']>[1]) =>
    (await k.rpc.getProgramAccounts(programId, { encoding: 'base64', commitment: 'confirmed', ...filters }).send()).map((a) => a.pubkey).sort();

  it('lists every account of the program, and only subscriptions with dataSize', async () => {
    const pdas = subscribers.map((s) => s.pda);
    expect(await owned({ encoding: 'base64' })).toEqual([...pdas, other.address].sort());
    expect(await owned({ encoding: 'base64', filters: [{ dataSize: BigInt(SUBSCRIPTION_ACCOUNT_SIZE) }] })).toEqual([...pdas].sort());
  });

  it('finds one owner’s subscription by memcmp on the owner field, in base58 and base64', async () => {
    const { owner, pda } = subscribers[2]!;
    const ownerBytes = getBase58Encoder().encode(owner.address);
    const base64 = Buffer.from(ownerBytes).toString('base64');
    expect(
      await owned({ encoding: 'base64', filters: [{ memcmp: { offset: 18n, bytes: owner.address as unknown as Base58EncodedBytes, encoding: 'base58' } }] }),
    ).toEqual([pda]);
    expect(await owned({ encoding: 'base64', filters: [{ memcmp: { offset: 18n, bytes: base64 as never, encoding: 'base64' } }] })).toEqual([pda]);
  });

  it('combines filters: pro tier (byte 8 = 1) among subscription accounts', async () => {
    const pro = subscribers.filter((s) => s.tier === 1).map((s) => s.pda);
    const tierIs1 = { memcmp: { offset: 8n, bytes: '2' as Base58EncodedBytes, encoding: 'base58' as const } };
    expect(await owned({ encoding: 'base64', filters: [{ dataSize: 51n }, tierIs1] })).toEqual([...pro].sort());
  });

  it('wraps the list in a context with withContext, and decodes in every encoding', async () => {
    const res = await k.rpc.getProgramAccounts(programId, { encoding: 'base64+zstd', withContext: true, filters: [{ dataSize: 51n }] }).send();
    expect(res.context.slot).toBeGreaterThan(0n);
    expect(res.value).toHaveLength(3);
    for (const { account } of res.value) {
      const decoded = subscriptionCodec.decode(unzstd(account.data[0]));
      expect(subscribers.map((s) => s.owner.address)).toContain(decoded.owner);
    }
    const plain = await k.rpc.getProgramAccounts(programId, { filters: [{ dataSize: 51n }] }).send();
    expect(plain.every((a) => typeof a.account.data === 'string')).toBe(true);
  });

  it('refuses more than four filters and a bad memcmp with -32602', async () => {
    const five = Array.from({ length: 5 }, () => ({ dataSize: 51n }));
    await expect(k.rpc.getProgramAccounts(programId, { encoding: 'base64', filters: five }).send()).rejects.toSatisfy((e) =>
      isSolanaError(e, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS),
    );
    const bad = [{ memcmp: { offset: 0n, bytes: '0OIl' as Base58EncodedBytes, encoding: 'base58' as const } }];
    await expect(k.rpc.getProgramAccounts(programId, { encoding: 'base64', filters: bad }).send()).rejects.toSatisfy((e) =>
      isSolanaError(e, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS),
    );
  });
});

describe('errors', () => {
  it('answers a method devchain does not serve with -32601', async () => {
    // kit's client lists only methods devchain serves; its proxy still sends any other name (getFees left agave in 2.0).
    const rpc = k.rpc as unknown as Record<string, () => { send(): Promise<unknown> }>;
    await expect(rpc.getFees!().send()).rejects.toSatisfy((e) => isSolanaError(e, SOLANA_ERROR__JSON_RPC__METHOD_NOT_FOUND));
  });
});
