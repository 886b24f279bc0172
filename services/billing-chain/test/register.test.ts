import { randomBytes } from 'node:crypto';
import bs58 from 'bs58';
import { Keypair, SystemProgram } from '@solana/web3.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainClient, newWallet, signIn, startStack, subscribe, type DevchainClient, type Session, type Stack } from '@agenthost/testkit';

// POST /subscription/register over HTTP with real signed transactions on devchain.

let stack: Stack;
let chain: DevchainClient;

beforeAll(async () => {
  stack = await startStack({
    services: ['auth', 'billing-chain'],
    devchain: true,
    // The keeper and the pick-up stay off here: only register may grant anything.
    serviceEnv: { 'billing-chain': { BACKGROUND_JOBS: 'false' } },
  });
  chain = chainClient(stack);
});
afterAll(async () => {
  await stack?.stop();
});

async function funded(lamports = 2_000_000_000): Promise<Session> {
  const s = await signIn(stack.api);
  await chain.airdrop(s.wallet.address, lamports);
  return s;
}

const refusal = (code: string, status = 400) => ({ error: expect.any(String), code, status });

describe('register', () => {
  it('verifies a pro subscription, activates it, and the status and headers show it', async () => {
    const s = await funded();
    const before = await s.api.get('/subscription/status');
    expect(before.status).toBe(404);
    expect(before.body).toEqual(refusal('SUBSCRIPTION_NOT_FOUND', 404));
    expect(before.headers.get('x-subscription-tier')).toBe('none');

    const tx = await chain.subscribe(s.wallet, 'pro');
    expect(tx.err).toBeNull();
    const reg = await s.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
    expect(reg.status).toBe(200);
    expect(reg.body).toEqual({
      success: true,
      subscription: { tier: 'pro', is_active: true, expires_at: expect.any(String), cancelled: false },
      tx_verified: true,
    });
    const onChain = await chain.subscription(s.wallet);
    expect(reg.body.subscription.expires_at).toBe(new Date(onChain!.expiresAt * 1000).toISOString());
    expect(reg.headers.get('x-subscription-tier')).toBe('pro');

    const st = await s.api.get('/subscription/status');
    expect(st.status).toBe(200);
    expect(st.body).toMatchObject({
      wallet_address: s.wallet.address,
      tier: 'pro',
      is_active: true,
      cancelled: false,
      expires_at: reg.body.subscription.expires_at,
      instances_used: 0,
      instances_limit: 5,
      requests_today: 1,
      requests_limit: 10000,
      storage_used_mb: 0,
      storage_limit_mb: 1024,
    });
    expect(st.headers.get('x-subscription-tier')).toBe('pro');
    expect(st.headers.get('x-subscription-expires')).toBe(reg.body.subscription.expires_at);
    expect(st.headers.get('x-usage-remaining')).toBe('9999');
    const again = await s.api.get('/subscription/status');
    expect(again.headers.get('x-usage-remaining')).toBe('9998');
    expect(again.body.requests_today).toBe(2);
  });

  it("refuses another wallet's transaction", async () => {
    const other = await funded();
    const tx = await chain.subscribe(other.wallet, 'pro');
    const me = await funded();
    const r = await me.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
    expect(r.status).toBe(400);
    expect(r.body).toEqual(refusal('TX_WRONG_SIGNER'));
    expect((await me.api.get('/subscription/status')).status).toBe(404);
  });

  it('refuses a transaction where the caller only paid the fee for someone else’s subscribe', async () => {
    const me = await funded();
    const owner = Keypair.generate();
    await chain.airdrop(owner.publicKey, 2_000_000_000);
    const { subscribeInstruction } = await import('@agenthost/subscription-program');
    const ix = subscribeInstruction({ programId: chain.programId, owner: owner.publicKey, treasury: chain.treasury, tier: 1 });
    const tx = await chain.send([ix], [chain.keypair(me.wallet), owner]);
    expect(tx.err).toBeNull();
    const r = await me.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
    expect(r.body).toEqual(refusal('TX_WRONG_SIGNER'));
  });

  it('refuses a failed transaction', async () => {
    const s = await funded(5_000_000); // pays fees and rent, not the 0.1 SOL price
    const tx = await chain.subscribe(s.wallet, 'pro', { skipPreflight: true });
    expect(tx.err).not.toBeNull();
    const r = await s.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
    expect(r.status).toBe(400);
    expect(r.body).toEqual(refusal('TX_FAILED'));
  });

  it('refuses a transaction to another program', async () => {
    const s = await funded();
    const tx = await chain.send(
      [SystemProgram.transfer({ fromPubkey: chain.keypair(s.wallet).publicKey, toPubkey: chain.treasury, lamports: 100_000_000 })],
      [chain.keypair(s.wallet)],
    );
    const r = await s.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
    expect(r.body).toEqual(refusal('TX_WRONG_PROGRAM'));
  });

  it('refuses a program transaction that is not a subscribe, and a subscribe for another tier', async () => {
    const s = await funded();
    const sub = await chain.subscribe(s.wallet, 'pro');
    const dep = await chain.deposit(s.wallet, 1000);
    expect(dep.err).toBeNull();
    expect((await s.api.post('/subscription/register', { tx_signature: dep.signature, tier: 1 })).body).toEqual(refusal('TX_NOT_SUBSCRIBE'));
    expect((await s.api.post('/subscription/register', { tx_signature: sub.signature, tier: 2 })).body).toEqual(refusal('TX_TIER_MISMATCH'));
    expect((await s.api.get('/subscription/status')).status).toBe(404);
  });

  it('answers a retry of the same registration by the same wallet with its subscription, and refuses the signature to another wallet', async () => {
    const s = await funded();
    const tx = await chain.subscribe(s.wallet, 'pro');
    const first = await s.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
    expect(first.status).toBe(200);
    // A client that lost the answer and retries gets the same, successful answer, not an error for a payment that went through.
    const again = await s.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const other = await signIn(stack.api);
    expect((await other.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 })).body).toEqual(refusal('TX_ALREADY_USED'));
    expect((await other.api.get('/subscription/status')).status).toBe(404);
  });

  it('registers once when the same registration arrives three times at once', async () => {
    const s = await funded();
    const tx = await chain.subscribe(s.wallet, 'enterprise');
    const rs = await Promise.all([0, 1, 2].map(() => s.api.post('/subscription/register', { tx_signature: tx.signature, tier: 2 })));
    expect(rs.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(new Set(rs.map((r) => JSON.stringify(r.body))).size).toBe(1);
    expect(rs[0]!.body.subscription).toMatchObject({ tier: 'enterprise', is_active: true });
  });

  it('refuses a malformed signature and an invalid tier with their own codes', async () => {
    const s = await funded();
    for (const bad of ['abc', '0OIl'.repeat(22), bs58.encode(randomBytes(32)), 'x'.repeat(500)]) {
      const r = await s.api.post('/subscription/register', { tx_signature: bad, tier: 1 });
      expect(r.status).toBe(400);
      expect(r.body).toEqual(refusal('TX_SIGNATURE_MALFORMED'));
    }
    const sig = bs58.encode(randomBytes(64));
    for (const tier of [3, -1, 1.5, '1', null]) {
      const r = await s.api.post('/subscription/register', { tx_signature: sig, tier });
      expect(r.status).toBe(400);
      expect(r.body).toEqual(refusal('INVALID_TIER'));
    }
    expect((await s.api.post('/subscription/register', { tier: 1 })).body).toEqual(refusal('VALIDATION_FAILED'));
    expect((await s.api.post('/subscription/register', { tx_signature: sig })).body).toEqual(refusal('VALIDATION_FAILED'));
  });

  it('answers 404 TRANSACTION_NOT_FOUND for an unknown signature', async () => {
    const s = await funded();
    const r = await s.api.post('/subscription/register', { tx_signature: bs58.encode(randomBytes(64)), tier: 1 });
    expect(r.status).toBe(404);
    expect(r.body).toEqual(refusal('TRANSACTION_NOT_FOUND', 404));
    expect(r.headers.get('retry-after')).toBe('2');
  });

  it('requires a token', async () => {
    const r = await stack.api.post('/subscription/register', { tx_signature: bs58.encode(randomBytes(64)), tier: 1 });
    expect(r.status).toBe(401);
    expect(r.headers.get('x-subscription-tier')).toBe('none');
  });

  it('picks nothing up without register while the pick-up is off, and refresh adopts an on-chain subscription', async () => {
    const s = await funded();
    await chain.subscribe(s.wallet, 'pro');
    expect((await s.api.get('/subscription/status')).status).toBe(404);
    const r = await s.api.post('/subscription/refresh');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ tier: 'pro', is_active: true, wallet_address: s.wallet.address });
    expect((await s.api.get('/subscription/status')).body.tier).toBe('pro');
  });

  it('refresh without any subscription on chain is 404', async () => {
    const s = await signIn(stack.api, newWallet());
    const r = await s.api.post('/subscription/refresh');
    expect(r.status).toBe(404);
    expect(r.body).toEqual(refusal('SUBSCRIPTION_NOT_FOUND', 404));
  });
});

describe('when the chain is down', () => {
  it('answers a fast 503 CHAIN_UNAVAILABLE and grants nothing; cached subscriptions keep working', async () => {
    const registered = await funded();
    await subscribe(stack, registered, { tier: 'pro', airdrop: 0 });
    const s = await funded();
    const tx = await chain.subscribe(s.wallet, 'pro');
    // A wallet without an account on chain: its next refreshes are answered without reading the chain.
    const none = await signIn(stack.api, newWallet());
    expect((await none.api.post('/subscription/refresh')).status).toBe(404);
    await stack.chain!.close();
    expect((await none.api.post('/subscription/refresh')).body).toEqual(refusal('SUBSCRIPTION_NOT_FOUND', 404));

    const started = performance.now();
    const r = await s.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
    const ms = performance.now() - started;
    expect(r.status).toBe(503);
    expect(r.body).toEqual(refusal('CHAIN_UNAVAILABLE', 503));
    expect(ms).toBeLessThan(1000);
    expect((await s.api.get('/subscription/status')).status).toBe(404);
    expect((await s.api.post('/subscription/refresh')).body).toEqual(refusal('CHAIN_UNAVAILABLE', 503));

    // A subscriber registered earlier is still served from the cache.
    const st = await registered.api.get('/subscription/status');
    expect(st.status).toBe(200);
    expect(st.body.tier).toBe('pro');
  });
});
