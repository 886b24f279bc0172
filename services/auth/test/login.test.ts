import { setTimeout as sleep } from 'node:timers/promises';
import bs58 from 'bs58';
import nacl from 'tweetnacl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newWallet, recordSecret, signIn, startStack, type Stack } from '@agenthost/testkit';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ services: ['auth'], serviceEnv: { auth: { NONCE_TTL_SECONDS: '2' } } });
});
afterAll(async () => {
  await stack?.stop();
});

async function nonceFor(address: string) {
  const n = await stack.api.get(`/auth/nonce?wallet_address=${address}`);
  expect(n.status).toBe(200);
  return n.body as { nonce: string; message: string; expires_at: string };
}

const expect401 = (res: { status: number; body: unknown }) => {
  expect(res.status).toBe(401);
  expect(res.body).toEqual({ error: expect.any(String), code: expect.any(String), status: 401 });
};

describe('wallet sign-in', () => {
  it('signs in with a real Ed25519 signature and the token opens an authenticated call', async () => {
    const s = await signIn(stack.api);
    const me = await s.api.get('/auth/me');
    expect(me.status).toBe(200);
    expect(me.body).toEqual({ user_id: s.user_id, wallet_address: s.wallet.address });
  });

  it('returns the same user_id for the same wallet on every login', async () => {
    const w = newWallet();
    const a = await signIn(stack.api, w);
    const b = await signIn(stack.api, w);
    expect(a.user_id).toBe(b.user_id);
  });

  it('issues a token valid for 24 hours', async () => {
    const w = newWallet();
    const n = await nonceFor(w.address);
    const l = await stack.api.post('/auth/login', { wallet_address: w.address, signature_base58: bs58.encode(w.sign(n.message)), nonce: n.nonce });
    recordSecret(l.body.token);
    const hours = (Date.parse(l.body.expires_at) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(23.9);
    expect(hours).toBeLessThanOrEqual(24);
  });

  it('rejects a reused nonce', async () => {
    const w = newWallet();
    const n = await nonceFor(w.address);
    const body = { wallet_address: w.address, signature_base58: bs58.encode(w.sign(n.message)), nonce: n.nonce };
    expect((await stack.api.post('/auth/login', body)).status).toBe(200);
    const again = await stack.api.post('/auth/login', body);
    expect401(again);
    expect(again.body.code).toBe('NONCE_INVALID');
  });

  it('lets exactly one of two concurrent logins with one nonce win', async () => {
    const w = newWallet();
    const n = await nonceFor(w.address);
    const body = { wallet_address: w.address, signature_base58: bs58.encode(w.sign(n.message)), nonce: n.nonce };
    const results = await Promise.all(Array.from({ length: 8 }, () => stack.api.post('/auth/login', body)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 401)).toHaveLength(7);
  });

  it('rejects an expired nonce', async () => {
    const w = newWallet();
    const n = await nonceFor(w.address);
    await sleep(2500);
    const res = await stack.api.post('/auth/login', { wallet_address: w.address, signature_base58: bs58.encode(w.sign(n.message)), nonce: n.nonce });
    expect401(res);
    expect(res.body.code).toBe('NONCE_INVALID');
  });

  it('rejects a signature made by another wallet', async () => {
    const w = newWallet();
    const other = newWallet();
    const n = await nonceFor(w.address);
    const res = await stack.api.post('/auth/login', { wallet_address: w.address, signature_base58: bs58.encode(other.sign(n.message)), nonce: n.nonce });
    expect401(res);
    expect(res.body.code).toBe('INVALID_SIGNATURE');
  });

  it('rejects a signature over a message other than the one issued', async () => {
    const w = newWallet();
    const n = await nonceFor(w.address);
    const res = await stack.api.post('/auth/login', {
      wallet_address: w.address,
      signature_base58: bs58.encode(w.sign(n.message.replace('Sign in', 'Sign up'))),
      nonce: n.nonce,
    });
    expect401(res);
  });

  it('answers 401, not 500, for malformed base58, a 63-byte signature and a 31-byte key', async () => {
    const w = newWallet();
    const n = await nonceFor(w.address);
    const good = w.sign(n.message);
    expect401(await stack.api.post('/auth/login', { wallet_address: w.address, signature_base58: '0OIl+/not-base58', nonce: n.nonce }));
    expect401(await stack.api.post('/auth/login', { wallet_address: w.address, signature_base58: bs58.encode(good.slice(0, 63)), nonce: n.nonce }));
    const shortKey = bs58.encode(nacl.randomBytes(31));
    expect401(await stack.api.post('/auth/login', { wallet_address: shortKey, signature_base58: bs58.encode(good), nonce: n.nonce }));
    // The nonce was not consumed by the failures: the right signature still works once.
    expect((await stack.api.post('/auth/login', { wallet_address: w.address, signature_base58: bs58.encode(good), nonce: n.nonce })).status).toBe(200);
  });

  it('refuses a nonce for an address that is not a 32-byte key with a 400', async () => {
    const res = await stack.api.get(`/auth/nonce?wallet_address=${bs58.encode(nacl.randomBytes(31))}`);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    expect((await stack.api.get('/auth/nonce')).status).toBe(400);
  });

  it('refuses oversized and non-JSON bodies with clear 4xx errors', async () => {
    const big = JSON.stringify({ wallet_address: 'x'.repeat(200_000), signature_base58: 'a', nonce: 'b' });
    const tooBig = await stack.api.raw('POST', '/auth/login', big, { 'content-type': 'application/json' });
    expect(tooBig.status).toBe(413);
    expect(tooBig.body).toEqual({ error: expect.any(String), code: 'PAYLOAD_TOO_LARGE', status: 413 });
    const broken = await stack.api.raw('POST', '/auth/login', '{"wallet_address": ', { 'content-type': 'application/json' });
    expect(broken.status).toBe(400);
    expect(broken.body.code).toBe('INVALID_JSON');
    const form = await stack.api.raw('POST', '/auth/login', 'wallet_address=x', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(form.status).toBe(415);
    expect(form.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    const missing = await stack.api.post('/auth/login', { wallet_address: 'abc' });
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('VALIDATION_FAILED');
    expect(missing.body.error).toMatch(/signature_base58/);
  });

  it('answers unknown routes with the error body', async () => {
    const res = await stack.api.get('/no/such/route');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: expect.any(String), code: 'NOT_FOUND', status: 404 });
    expect(res.headers.get('x-request-id')).toBeTruthy();
  });

  it('carries a request id on every response, echoing a safe client id', async () => {
    const res = await stack.api.get('/health/live', { 'x-request-id': 'client-req-12345' });
    expect(res.headers.get('x-request-id')).toBe('client-req-12345');
    const unsafe = await stack.api.get('/health/live', { 'x-request-id': 'bad id\twith space' });
    expect(unsafe.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});
