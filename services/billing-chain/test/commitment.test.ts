import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { chainClient, signIn, startStack, type DevchainClient, type Stack } from '@agenthost/testkit';

// Registration waits for the configured commitment (finalized here), and a stale cache is served
// while the chain cannot be read.

let stack: Stack;
let chain: DevchainClient;
beforeAll(async () => {
  stack = await startStack({
    services: ['auth', 'billing-chain'],
    devchain: { slotMs: 100, finalizeSlots: 15 },
    serviceEnv: { 'billing-chain': { SOLANA_COMMITMENT: 'finalized', BACKGROUND_JOBS: 'false', SUBSCRIPTION_CACHE_TTL_SECONDS: '1' } },
  });
  chain = chainClient(stack);
});
afterAll(async () => {
  await stack?.stop();
});

it('answers 404 TRANSACTION_NOT_FOUND (retryable) until the transaction reaches the configured commitment', async () => {
  const s = await signIn(stack.api);
  await chain.airdrop(s.wallet.address, 2_000_000_000);
  const tx = await chain.subscribe(s.wallet, 'pro'); // confirmed, not yet finalized
  const early = await s.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
  expect(early.status).toBe(404);
  expect(early.body.code).toBe('TRANSACTION_NOT_FOUND');
  expect((await s.api.get('/subscription/status')).status).toBe(404);

  const deadline = Date.now() + 10_000;
  for (;;) {
    const { value } = await chain.connection.getSignatureStatuses([tx.signature]);
    if (value[0]?.confirmationStatus === 'finalized') break;
    if (Date.now() > deadline) throw new Error('not finalized');
    await sleep(100);
  }
  const later = await s.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
  expect(later.status).toBe(200);
  expect(later.body.subscription.tier).toBe('pro');
});

it('serves the stale cached subscription when the TTL passed and the chain is down', async () => {
  const s = await signIn(stack.api);
  await chain.airdrop(s.wallet.address, 2_000_000_000);
  const tx = await chain.subscribe(s.wallet, 'pro');
  // Finalized before register (15 slots of 100 ms).
  await sleep(2000);
  const reg = await s.api.post('/subscription/register', { tx_signature: tx.signature, tier: 1 });
  expect(reg.status).toBe(200);
  await stack.chain!.close();
  await sleep(1100);
  const st = await s.api.get('/subscription/status');
  expect(st.status).toBe(200);
  expect(st.body).toMatchObject({ tier: 'pro', is_active: true });
  expect((await s.api.get('/usage/metrics')).status).toBe(200);
  const billing = stack.services.get('billing-chain')!;
  expect(billing.lines().some((l) => l.includes('serving the stale cached subscription'))).toBe(true);
});
