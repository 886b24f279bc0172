import { SOLANA_ERROR__JSON_RPC__INVALID_PARAMS, address, getBase58Encoder, getBase64Encoder, isSolanaError } from '@solana/kit';
import type { Address, Base58EncodedBytes, KeyPairSigner } from '@solana/kit';
import { findSubscriptionAddress, subscribeInstruction } from '@agenthost/subscription-program';
import { PublicKey } from '@solana/web3.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fromWeb3, listen, memoInstruction, startKitChain, subscriptionCodec, transferInstruction } from './kit.ts';
import type { KitChain } from './kit.ts';

let k: KitChain;
let programId: Address;
let treasury: Address;
let aborts: AbortController[] = [];

beforeAll(async () => {
  k = await startKitChain();
  const cfg = (await k.t.rpc('devchain_getConfig')).result;
  programId = address(cfg.programId);
  treasury = address(cfg.treasury);
});
afterEach(() => {
  aborts.forEach((a) => a.abort());
  aborts = [];
});
afterAll(async () => {
  await k.close();
});

const signal = () => {
  const a = new AbortController();
  aborts.push(a);
  return a.signal;
};

function subscribe(owner: KeyPairSigner, tier: number) {
  const pk = (a: Address) => new PublicKey(a);
  return k.send(owner, [fromWeb3(subscribeInstruction({ programId: pk(programId), owner: pk(owner.address), treasury: pk(treasury), tier }))]);
}

const pdaOf = (owner: KeyPairSigner) => address(findSubscriptionAddress(new PublicKey(programId), new PublicKey(owner.address))[0].toBase58());

describe('programSubscribe', () => {
  it('notifies the accounts of a program that pass the filters, with their new data', async () => {
    const [alice, bob] = await Promise.all([k.funded(1n), k.funded(1n)]);
    const ownerIsAlice = { memcmp: { offset: 18n, bytes: alice.address as unknown as Base58EncodedBytes, encoding: 'base58' as const } };
    const stream = await k.subscriptions
      .programNotifications(programId, { encoding: 'base64', commitment: 'confirmed', filters: [{ dataSize: 51n }, ownerIsAlice] })
      .subscribe({ abortSignal: signal() });
    const notes = listen(stream);
    await subscribe(bob, 2);
    await subscribe(alice, 1);
    const note = await notes.first();
    expect(note.value.pubkey).toBe(pdaOf(alice));
    expect(notes.seen.map((n) => n.value.pubkey)).not.toContain(pdaOf(bob));
    expect(note.value.account.owner).toBe(programId);
    const decoded = subscriptionCodec.decode(getBase64Encoder().encode(note.value.account.data[0]));
    expect(decoded).toMatchObject({ owner: alice.address, tier: 1, isActive: true });
    expect(note.context.slot).toBeGreaterThan(0n);
  });

  it('sends the legacy base58 string when no encoding is asked for, at processed as a transaction lands', async () => {
    const carol = await k.funded(1n);
    const stream = await k.subscriptions.programNotifications(programId, { commitment: 'processed' }).subscribe({ abortSignal: signal() });
    const notes = listen(stream);
    await subscribe(carol, 0);
    const note = await notes.first((n) => n.value.pubkey === pdaOf(carol));
    expect(typeof note.value.account.data).toBe('string');
    expect(subscriptionCodec.decode(getBase58Encoder().encode(note.value.account.data)).tier).toBe(0);
  });
});

describe('accountSubscribe', () => {
  it('reports a closed account as the default account: 0 lamports, system-owned, no data', async () => {
    const [gone, heir] = await Promise.all([k.funded(1n), k.funded(1n)]);
    const stream = await k.subscriptions
      .accountNotifications(gone.address, { encoding: 'base64', commitment: 'confirmed' })
      .subscribe({ abortSignal: signal() });
    const notes = listen(stream);
    await k.send(gone, [transferInstruction(gone.address, heir.address, 1_000_000_000n - 5000n)]);
    const note = await notes.first();
    expect(note.value).toMatchObject({ lamports: 0n, owner: '11111111111111111111111111111111', space: 0n, executable: false, data: ['', 'base64'] });
    expect((note.value as { rentEpoch?: bigint }).rentEpoch).toBe(0n);
  });
});

describe('logsSubscribe', () => {
  it('delivers the logs of transactions that mention the address, and only those', async () => {
    const [dave, erin] = await Promise.all([k.funded(1n), k.funded(1n)]);
    const stream = await k.subscriptions.logsNotifications({ mentions: [dave.address] }, { commitment: 'confirmed' }).subscribe({ abortSignal: signal() });
    const notes = listen(stream);
    const other = await k.send(erin, [memoInstruction(erin.address, 'not for dave')]);
    const sig = await k.send(dave, [memoInstruction(dave.address, 'for dave')]);
    const note = await notes.first();
    expect(note.value.signature).toBe(sig);
    expect(notes.seen.map((n) => n.value.signature)).not.toContain(other);
    expect(note.value.err).toBeNull();
    expect(note.value.logs).toContain('Program log: Memo (len 8): "for dave"');
  });

  it('delivers every transaction with "all", including airdrops', async () => {
    const stream = await k.subscriptions.logsNotifications('all', { commitment: 'processed' }).subscribe({ abortSignal: signal() });
    const notes = listen(stream);
    const frank = await k.funded(1n);
    const [entry] = await k.rpc.getSignaturesForAddress(frank.address, { commitment: 'confirmed' }).send();
    const note = await notes.first((n) => n.value.signature === entry?.signature);
    expect(note.value.logs).toContain('Program 11111111111111111111111111111111 success');
    expect(note.value.err).toBeNull();
  });

  it('refuses more than one mentioned address with -32602', async () => {
    const [a, b] = await Promise.all([k.funded(1n), k.funded(1n)]);
    const twice = k.subscriptions.logsNotifications({ mentions: [a.address, b.address] as unknown as [Address] }).subscribe({ abortSignal: signal() });
    await expect(twice).rejects.toSatisfy((e) => isSolanaError(e, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS));
  });
});

describe('unsubscribing', () => {
  it('drops program and logs subscriptions by id, once, and only with the matching method', async () => {
    const ws = new WebSocket(k.t.chain.wsUrl);
    await new Promise((r) => ws.addEventListener('open', r, { once: true }));
    let nextId = 0;
    const call = (method: string, params: unknown[]) =>
      new Promise<{ result?: unknown; error?: { code: number } }>((resolve) => {
        const id = ++nextId;
        const onMessage = (m: MessageEvent) => {
          const msg = JSON.parse(String(m.data));
          if (msg.id !== id) return;
          ws.removeEventListener('message', onMessage);
          resolve(msg);
        };
        ws.addEventListener('message', onMessage);
        ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      });
    try {
      const logs = (await call('logsSubscribe', ['all'])).result as number;
      const program = (await call('programSubscribe', [programId, { encoding: 'base64' }])).result as number;
      expect((await call('programUnsubscribe', [logs])).error?.code).toBe(-32602);
      expect((await call('logsUnsubscribe', [logs])).result).toBe(true);
      expect((await call('logsUnsubscribe', [logs])).error?.code).toBe(-32602);
      expect((await call('programUnsubscribe', [program])).result).toBe(true);
      expect((await call('programSubscribe', [programId, { encoding: 'base58+xz' }])).error?.code).toBe(-32602);
    } finally {
      ws.close();
    }
  });
});
