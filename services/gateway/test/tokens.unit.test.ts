import { createPublicKey, generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type Harness } from './app-harness.ts';

// Access tokens as the gateway verifies them, with the key it trusts pinned (app-harness.ts) and the harness's clock:
// every refusal is a 401 in the error shape. (Keys taken from auth over the bus, and auth going away: tokens.test.ts.)

let app: Harness;
const user_id = randomUUID();
const wallet = '11111111111111111111111111111111';

beforeAll(async () => {
  app = await startApp();
});
afterAll(async () => {
  await app?.close();
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

const nowSeconds = () => Math.floor(app.clock.now() / 1000);

async function forge(f: Forge = {}): Promise<string> {
  const now = nowSeconds();
  let jwt = new SignJWT({ wallet })
    .setProtectedHeader({ alg: 'EdDSA', kid: f.kid ?? app.kid, typ: f.typ ?? 'at+jwt' })
    .setIssuer(f.iss ?? 'agenthost-auth')
    .setAudience(f.aud ?? 'agenthost-api')
    .setSubject(user_id)
    .setIssuedAt(now - 10)
    .setExpirationTime(f.exp ?? now + 3600);
  if (f.jti !== false) jwt = jwt.setJti(randomUUID());
  return jwt.sign(f.key ?? app.signer);
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

async function me(authorization?: string) {
  const res = await app.send('GET', '/auth/me', undefined, authorization === undefined ? {} : { authorization });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function expectUnauthorized(token: string) {
  const res = await me(`Bearer ${token}`);
  expect(res.status).toBe(401);
  expect(res.body).toEqual({ error: expect.any(String), code: 'UNAUTHORIZED', status: 401 });
  return res.body;
}

describe('access token verification at the gateway', () => {
  it('accepts a token signed with the current key and all claims right', async () => {
    const res = await me(`Bearer ${await forge()}`);
    expect(res.status).toBe(200);
    expect(res.body.user_id).toBe(user_id);
  });

  it('rejects alg none', async () => {
    const now = nowSeconds();
    const token = `${b64({ alg: 'none', typ: 'at+jwt', kid: app.kid })}.${b64({ sub: user_id, wallet, iss: 'agenthost-auth', aud: 'agenthost-api', iat: now, exp: now + 600, jti: 'x' })}.`;
    await expectUnauthorized(token);
  });

  it('rejects HS256 signed with the public key (algorithm confusion)', async () => {
    const pub = createPublicKey(app.signer).export({ type: 'spki', format: 'pem' }).toString();
    const token = await new SignJWT({ wallet })
      .setProtectedHeader({ alg: 'HS256', kid: app.kid, typ: 'at+jwt' })
      .setIssuer('agenthost-auth')
      .setAudience('agenthost-api')
      .setSubject(user_id)
      .setIssuedAt(nowSeconds())
      .setExpirationTime(nowSeconds() + 3600)
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
    await expectUnauthorized(await forge({ exp: nowSeconds() - 60 }));
  });

  it('refuses a token once its expiry passes, even one it verified (and cached) before', async () => {
    const token = await forge({ exp: nowSeconds() + 60 });
    expect((await me(`Bearer ${token}`)).status).toBe(200);
    app.clock.advance(59_000);
    expect((await me(`Bearer ${token}`)).status).toBe(200);
    app.clock.advance(2_000);
    expect((await expectUnauthorized(token)).error).toBe('Access token has expired');
  });

  it('rejects a wrong audience, issuer or type, and a missing jti', async () => {
    await expectUnauthorized(await forge({ aud: 'someone-else' }));
    await expectUnauthorized(await forge({ iss: 'evil-issuer' }));
    await expectUnauthorized(await forge({ typ: 'JWT' }));
    await expectUnauthorized(await forge({ jti: false }));
  });

  it('rejects a missing or malformed Authorization header', async () => {
    const token = await forge();
    expect((await me()).status).toBe(401);
    expect((await me(`Basic ${token}`)).status).toBe(401);
    expect((await me('Bearer not-a-jwt')).status).toBe(401);
  });
});
