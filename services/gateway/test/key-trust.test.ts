import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts, createLogger, endpoint, serve } from '@agenthost/shared';
import { newSigningKeyPem, recordSecret, signIn, spawnService, startStack, waitFor, type ServiceProcess, type Stack } from '@agenthost/testkit';

// The gateway believes only auth's signing keys: nobody else can answer its key requests, and a key
// auth stops serving stops verifying within one refresh, cached verifications included.

const pem = newSigningKeyPem;

let stack: Stack;
let auth: ServiceProcess | undefined;
const open: NatsConnection[] = [];

beforeAll(async () => {
  stack = await startStack({ services: ['auth'], serviceEnv: { auth: { AUTH_JWT_PRIVATE_KEY: pem() }, gateway: { JWKS_REFRESH_SECONDS: '1' } } });
});
afterAll(async () => {
  await Promise.all(open.map((c) => c.close()));
  await auth?.stop();
  await stack?.stop();
});

describe("the gateway trusts only auth's signing keys", () => {
  it('refuses a key injected on the bus by another identity: the forged token stays 401', async () => {
    const session = await signIn(stack.api);
    const attacker = generateKeyPairSync('ed25519');
    const forgedKid = 'attacker-kid';
    const forged = await new SignJWT({ wallet: session.wallet.address })
      .setProtectedHeader({ alg: 'EdDSA', kid: forgedKid, typ: 'at+jwt' })
      .setIssuer('agenthost-auth')
      .setAudience('agenthost-api')
      .setSubject(session.user_id)
      .setIssuedAt()
      .setExpirationTime('1h')
      .setJti(randomUUID())
      .sign(attacker.privateKey);
    recordSecret(forged);

    // A compromised service (here billing-chain's identity) tries to answer auth.v1.keys.list with its key.
    const nc = await stack.nats.connect('billing-chain');
    open.push(nc);
    const refused = new Promise<string>((resolve) => {
      void (async () => {
        for await (const s of nc.status()) if (s.type === 'error') resolve(String(s.data));
      })();
    });
    const jwk = { ...attacker.publicKey.export({ format: 'jwk' }), kid: forgedKid, alg: 'EdDSA', use: 'sig' };
    await serve(nc, { name: 'auth', version: '6.6.6', log: createLogger('attacker', 'silent') }, [
      endpoint(contracts.auth.jwks, async () => ({ keys: [jwk as never] })),
    ]).catch(() => undefined);
    expect(await refused).toMatch(/permission/i);

    for (let i = 0; i < 5; i++) {
      const res = await stack.api.get('/auth/me', { authorization: `Bearer ${forged}` });
      expect(res.status).toBe(401);
    }
    expect((await session.api.get('/auth/me')).status).toBe(200);
  });

  it('drops a key auth no longer serves at the next refresh, even for tokens it had already verified', async () => {
    const old = await signIn(stack.api);
    expect((await old.api.get('/auth/me')).status).toBe(200); // verified and cached under the old kid

    // Auth rotates to a new key without keeping the old one (a key that leaked, say).
    await stack.services.get('auth')!.stop();
    auth = await spawnService('auth', { env: { ...stack.envFor('auth'), AUTH_JWT_PRIVATE_KEY: pem(), AUTH_JWT_PREVIOUS_KEYS: '[]' }, label: 'auth-rotated' });

    await waitFor('the old key to stop verifying', async () => (await old.api.get('/auth/me')).status === 401, 15_000, 200);
    const res = await old.api.get('/auth/me');
    expect(res.body).toEqual({ error: expect.any(String), code: 'UNAUTHORIZED', status: 401 });
    const fresh = await signIn(stack.api);
    expect((await fresh.api.get('/auth/me')).status).toBe(200);
  });
});
