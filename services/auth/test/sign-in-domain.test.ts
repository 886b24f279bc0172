import { createSignInMessage } from '@solana/wallet-standard-util';
import type { SolanaSignInInput } from '@solana/wallet-standard-features';
import bs58 from 'bs58';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '@agenthost/shared';
import { newWallet, startStack, type Stack, type Wallet } from '@agenthost/testkit';
import { authConfig } from '../src/config.ts';

// The domain users sign in for is the dashboard's, https://agenthost.localhost in a default deploy (security review,
// issue 29, finding 8): a wallet builds the message from the page it runs on and refuses one for another domain,
// and a user who signs our message must not be signing for another site.

/** The page's origin in a default deploy: deploy/env.sh's EDGE_DOMAIN on port 443. */
const PAGE = new URL('https://agenthost.localhost/');

let stack: Stack;
beforeAll(async () => {
  // What deploy/start.sh records for every service in a default deploy (run-service.sh gives it to auth).
  stack = await startStack({ services: ['auth'], serviceEnv: { auth: { EDGE_DOMAIN: PAGE.hostname, EDGE_HTTPS_PORT: '443' } } });
});
afterAll(async () => {
  await stack?.stop();
});

const b64 = (u: Uint8Array) => Buffer.from(u).toString('base64');
type Input = SolanaSignInInput & { domain: string; address: string };
const nonceFor = async (w: Wallet) =>
  (await stack.api.get(`/auth/nonce?wallet_address=${w.address}`)).body as { nonce: string; message: string; sign_in_input: Input };
/** solana:signIn as a wallet does it on a page: the message built from our input, with the page's domain and URI. */
const walletSignIn = (w: Wallet, input: Input, page: URL) => {
  const signedMessage = createSignInMessage({ ...input, domain: page.host, uri: page.href });
  return stack.api.post('/auth/login', { account: { address: w.address }, signedMessage: b64(signedMessage), signature: b64(w.sign(signedMessage)) });
};

describe('the sign-in domain of a default deploy', () => {
  it("is the edge's origin: the message to sign names https://agenthost.localhost", async () => {
    const w = newWallet();
    const n = await nonceFor(w);
    expect(n.sign_in_input).toMatchObject({ domain: 'agenthost.localhost', uri: 'https://agenthost.localhost' });
    expect(n.message.split('\n')[0]).toBe('agenthost.localhost wants you to sign in with your Solana account:');
    // The signMessage fallback: our message, signed as written.
    const r = await stack.api.post('/auth/login', { wallet_address: w.address, signature_base58: bs58.encode(w.sign(n.message)), nonce: n.nonce });
    expect(r.status, r.text).toBe(200);
  });

  it('accepts a message a wallet built on the dashboard page, and refuses one built for localhost:8080', async () => {
    const w = newWallet();
    const onPage = await walletSignIn(w, (await nonceFor(w)).sign_in_input, new URL('/#/signin', PAGE));
    expect(onPage.status, onPage.text).toBe(200);
    expect(onPage.body.wallet_address).toBe(w.address);

    const old = await walletSignIn(w, (await nonceFor(w)).sign_in_input, new URL('http://localhost:8080/'));
    expect(old.status).toBe(401);
    expect(old.body).toMatchObject({ code: 'INVALID_SIGNATURE', error: expect.stringContaining('"localhost:8080" is not one this service signs in for') });
  });
});

describe("auth's sign-in settings", () => {
  const parse = (env: Record<string, string>) => {
    const c = parseConfig(authConfig, { AUTH_JWT_PRIVATE_KEY: 'set', ...env });
    return { domain: c.SIWS_DOMAIN, uri: c.SIWS_URI };
  };

  it("default to the edge's host, with its port when not 443", () => {
    expect(parse({})).toEqual({ domain: 'agenthost.localhost', uri: 'https://agenthost.localhost' });
    expect(parse({ EDGE_DOMAIN: 'agents.example.com', EDGE_HTTPS_PORT: '8443' })).toEqual({
      domain: 'agents.example.com:8443',
      uri: 'https://agents.example.com:8443',
    });
    expect(parse({ SIWS_DOMAIN: '', SIWS_URI: '' })).toEqual({ domain: 'agenthost.localhost', uri: 'https://agenthost.localhost' });
  });

  it("let an operator's explicit setting win", () => {
    expect(parse({ EDGE_DOMAIN: 'agents.example.com', SIWS_DOMAIN: 'app.example.com', SIWS_URI: 'https://app.example.com/login' })).toEqual({
      domain: 'app.example.com',
      uri: 'https://app.example.com/login',
    });
  });
});
