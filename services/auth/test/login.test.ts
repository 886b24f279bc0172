import bs58 from 'bs58';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newWallet, signIn, startStack, type Stack } from '@agenthost/testkit';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ services: ['auth'] });
});
afterAll(async () => {
  await stack?.stop();
});

describe('wallet sign-in', () => {
  it('signs in with a real Ed25519 signature and gets a 24 h token', async () => {
    const s = await signIn(stack.api);
    expect(s.token.split('.')).toHaveLength(3);
    expect(s.user_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('rejects a reused nonce', async () => {
    const w = newWallet();
    const n = await stack.api.get(`/auth/nonce?wallet_address=${w.address}`);
    const body = { wallet_address: w.address, signature_base58: bs58.encode(w.sign(n.body.message)), nonce: n.body.nonce };
    expect((await stack.api.post('/auth/login', body)).status).toBe(200);
    const again = await stack.api.post('/auth/login', body);
    expect(again.status).toBe(401);
    expect(again.body).toEqual({ error: expect.any(String), code: 'NONCE_INVALID', status: 401 });
  });
});
