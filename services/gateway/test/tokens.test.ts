import { generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import { SignJWT, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordSecret, signIn, startStack, type Session, type Stack } from '@agenthost/testkit';

const signer = generateKeyPairSync('ed25519');
const signerPem = signer.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
recordSecret(signerPem.split('\n')[1]!);

let stack: Stack;
let session: Session;
let kid: string;

beforeAll(async () => {
  stack = await startStack({ services: ['auth'], serviceEnv: { auth: { AUTH_JWT_PRIVATE_KEY: signerPem } } });
  session = await signIn(stack.api);
  kid = decodeProtectedHeader(session.token).kid!;
});
afterAll(async () => {
  await stack?.stop();
});

interface Forge {
  key?: KeyObject;
  kid?: string;
  typ?: string;
  iss?: string;
  aud?: string;
  exp?: number;
  jti?: boolean;
}

async function forge(f: Forge = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  let jwt = new SignJWT({ wallet: session.wallet.address })
    .setProtectedHeader({ alg: 'EdDSA', kid: f.kid ?? kid, typ: f.typ ?? 'at+jwt' })
    .setIssuer(f.iss ?? 'agenthost-auth')
    .setAudience(f.aud ?? 'agenthost-api')
    .setSubject(session.user_id)
    .setIssuedAt(now - 10)
    .setExpirationTime(f.exp ?? now + 3600);
  if (f.jti !== false) jwt = jwt.setJti(randomUUID());
  const token = await jwt.sign(f.key ?? signer.privateKey);
  recordSecret(token);
  return token;
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

async function me(token: string) {
  return stack.api.get('/auth/me', { authorization: `Bearer ${token}` });
}

async function expectUnauthorized(token: string) {
  const res = await me(token);
  expect(res.status).toBe(401);
  expect(res.body).toEqual({ error: expect.any(String), code: 'UNAUTHORIZED', status: 401 });
}

describe('access token verification at the gateway', () => {
  it('accepts a token signed with the current key and all claims right', async () => {
    const res = await me(await forge());
    expect(res.status).toBe(200);
    expect(res.body.user_id).toBe(session.user_id);
  });

  it('rejects alg none', async () => {
    const now = Math.floor(Date.now() / 1000);
    const token = `${b64({ alg: 'none', typ: 'at+jwt', kid })}.${b64({ sub: session.user_id, wallet: session.wallet.address, iss: 'agenthost-auth', aud: 'agenthost-api', iat: now, exp: now + 600, jti: 'x' })}.`;
    await expectUnauthorized(token);
  });

  it('rejects HS256 signed with the public key (algorithm confusion)', async () => {
    const pub = signer.publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const token = await new SignJWT({ wallet: session.wallet.address })
      .setProtectedHeader({ alg: 'HS256', kid, typ: 'at+jwt' })
      .setIssuer('agenthost-auth')
      .setAudience('agenthost-api')
      .setSubject(session.user_id)
      .setIssuedAt()
      .setExpirationTime('1h')
      .setJti('j')
      .sign(new TextEncoder().encode(pub));
    await expectUnauthorized(token);
  });

  it('rejects a token signed by another key under our kid', async () => {
    await expectUnauthorized(await forge({ key: generateKeyPairSync('ed25519').privateKey }));
  });

  it('rejects an unknown kid', async () => {
    await expectUnauthorized(await forge({ kid: 'no-such-key-id' }));
  });

  it('rejects an expired token', async () => {
    await expectUnauthorized(await forge({ exp: Math.floor(Date.now() / 1000) - 60 }));
  });

  it('rejects a wrong audience, issuer or type, and a missing jti', async () => {
    await expectUnauthorized(await forge({ aud: 'someone-else' }));
    await expectUnauthorized(await forge({ iss: 'evil-issuer' }));
    await expectUnauthorized(await forge({ typ: 'JWT' }));
    await expectUnauthorized(await forge({ jti: false }));
  });

  it('rejects a missing or malformed Authorization header', async () => {
    expect((await stack.api.get('/auth/me')).status).toBe(401);
    expect((await stack.api.get('/auth/me', { authorization: `Basic ${session.token}` })).status).toBe(401);
    expect((await stack.api.get('/auth/me', { authorization: 'Bearer not-a-jwt' })).status).toBe(401);
  });
});

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
