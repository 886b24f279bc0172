import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, gatewayUrl, newWallet, signIn, startStack, type Stack } from '@agenthost/testkit';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ services: ['auth'], gateways: 2 });
});
afterAll(async () => {
  await stack?.stop();
});

describe('POST /auth/logout', () => {
  it('revokes the caller’s token on every gateway at once, including one started later, and leaves the user’s other tokens working', async () => {
    const [g0, g1] = stack.gateways.map((g) => apiClient(gatewayUrl(g)));
    const wallet = newWallet();
    const a = await signIn(g0!, wallet);
    const b = await signIn(g1!, wallet);
    // Both replicas have verified (and cached) token a before it is revoked.
    for (const g of [g0!, g1!]) expect((await g.withToken(a.token).get('/auth/me')).status).toBe(200);

    const out = await g0!.withToken(a.token).post('/auth/logout');
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ success: true });
    for (const g of [g0!, g1!]) {
      const refused = await g.withToken(a.token).get('/auth/me');
      expect(refused.status).toBe(401);
      expect(refused.body).toEqual({ error: expect.any(String), code: 'UNAUTHORIZED', status: 401 });
      expect((await g.withToken(b.token).get('/auth/me')).body.user_id).toBe(a.user_id);
    }
    // Logging out again is harmless: the token is simply no longer valid.
    const again = await g1!.withToken(a.token).post('/auth/logout');
    expect(again.status).toBe(401);
    expect(again.body.code).toBe('UNAUTHORIZED');

    // A replica that starts after the revocation loads the deny-list.
    await stack.gateways[1]!.stop();
    await stack.gateways[1]!.start();
    const g1b = apiClient(gatewayUrl(stack.gateways[1]!));
    expect((await g1b.withToken(a.token).get('/auth/me')).status).toBe(401);
    expect((await g1b.withToken(b.token).get('/auth/me')).status).toBe(200);

    // Logging out token b as well works the same way, from the other replica.
    expect((await g1b.withToken(b.token).post('/auth/logout')).status).toBe(200);
    expect((await g0!.withToken(b.token).get('/auth/me')).status).toBe(401);
  });
});
