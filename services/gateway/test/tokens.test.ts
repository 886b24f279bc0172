import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIn, startStack, type Session, type Stack } from '@agenthost/testkit';

// Auth going away while the gateway verifies tokens with the keys it took from auth over the bus. How each token is
// verified (forged, expired, wrong claims, Authorization header) is tested in this process: tokens.unit.test.ts.

let stack: Stack;
let session: Session;

beforeAll(async () => {
  stack = await startStack({ services: ['auth'] });
  session = await signIn(stack.api);
  // The gateway loads auth's keys at its start and on the first token of an unknown key. A gateway that started
  // while auth was still coming up (a loaded machine) loads them here, so the test below stops auth after it has them.
  expect((await me(session.token)).status).toBe(200);
});
afterAll(async () => {
  await stack?.stop();
});

async function me(token: string) {
  return stack.api.get('/auth/me', { authorization: `Bearer ${token}` });
}

describe('auth going away', () => {
  it('gives a fast 503 while auth is stopped, keeps verifying tokens, and recovers when auth is back', async () => {
    const auth = stack.services.get('auth')!;
    await auth.stop();
    const started = Date.now();
    const res = await stack.api.get(`/auth/nonce?wallet_address=${session.wallet.address}`);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ error: expect.stringMatching(/auth/), code: 'SERVICE_UNAVAILABLE', status: 503 });
    expect(res.headers.get('retry-after')).toBe('1');
    // Tokens are verified by the gateway itself with the keys it already has.
    expect((await me(session.token)).status).toBe(200);
    const ready = await stack.api.get('/health/ready');
    expect(ready.status).toBe(503);
    expect(ready.body.services.auth).toBe('unavailable');

    await auth.start();
    const again = await stack.api.get(`/auth/nonce?wallet_address=${session.wallet.address}`);
    expect(again.status).toBe(200);
    const s2 = await signIn(stack.api);
    expect((await s2.api.get('/auth/me')).status).toBe(200);
  });

  it('gives a 503 after the request timeout when auth hangs, and recovers when it resumes', async () => {
    const pid = stack.services.get('auth')!.pid()!;
    process.kill(pid, 'SIGSTOP');
    try {
      const started = Date.now();
      const res = await stack.api.get(`/auth/nonce?wallet_address=${session.wallet.address}`);
      const took = Date.now() - started;
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('SERVICE_UNAVAILABLE');
      expect(took).toBeGreaterThanOrEqual(2900); // NATS_REQUEST_TIMEOUT_MS of the test stack
      expect(took).toBeLessThan(5000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect((await stack.api.get(`/auth/nonce?wallet_address=${session.wallet.address}`)).status).toBe(200);
  });
});
