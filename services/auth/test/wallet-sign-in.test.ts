import bs58 from 'bs58';
import { getOffchainMessageEncoder } from '@solana/offchain-messages';
import { createSignInMessage, createSignInMessageText, verifySignIn } from '@solana/wallet-standard-util';
import type { SolanaSignInInput as WalletInput } from '@solana/wallet-standard-features';

/** What createSignInMessage needs at least: a domain and an account. */
type SolanaSignInInput = WalletInput & { domain: string; address: string };
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newWallet, startStack, type Stack, type Wallet } from '@agenthost/testkit';

// Sign-in as wallets do it (Wallet Standard's solana:signIn): the wallet builds the message from the input we give
// it, or from none, with the domain of the page it runs on; @solana/wallet-standard-util builds and checks messages
// as wallets do, and is the reference here.
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    services: ['auth'],
    serviceEnv: { auth: { SIWS_DOMAIN: 'agents.example.test', SIWS_URI: 'https://agents.example.test', SIWS_DOMAINS: 'agents.example.test,app.example.test' } },
  });
});
afterAll(async () => {
  await stack?.stop();
});

const b64 = (u: Uint8Array) => Buffer.from(u).toString('base64');
const nonceFor = async (w: Wallet) =>
  (await stack.api.get(`/auth/nonce?wallet_address=${w.address}`)).body as { nonce: string; sign_in_input: SolanaSignInInput };
/** What solana:signIn returns, as a dashboard posts it: the account, and the signed bytes and signature in base64. */
const signInOutput = (w: Wallet, signedMessage: Uint8Array) => ({
  account: { address: w.address },
  signedMessage: b64(signedMessage),
  signature: b64(w.sign(signedMessage)),
});
const login = (body: unknown) => stack.api.post('/auth/login', body);

describe('sign-in with a message the wallet built', () => {
  it('accepts solana:signIn on our sign_in_input, which the reference verifier also accepts', async () => {
    const w = newWallet();
    const { sign_in_input } = await nonceFor(w);
    const signedMessage = createSignInMessage(sign_in_input);
    const signature = w.sign(signedMessage);
    const account = { address: w.address, publicKey: bs58.decode(w.address), chains: [], features: [] };
    expect(verifySignIn(sign_in_input, { account, signedMessage, signature })).toBe(true);
    const r = await login({ account: { address: w.address }, signedMessage: b64(signedMessage), signature: b64(signature) });
    expect(r.status, r.text).toBe(200);
    expect(r.body.wallet_address).toBe(w.address);
    // The nonce is spent: the same output again is refused.
    expect((await login({ account: { address: w.address }, signedMessage: b64(signedMessage), signature: b64(signature) })).body.code).toBe('NONCE_INVALID');
  });

  it("accepts the page's own domain when it is allowed, and refuses one outside the allowlist", async () => {
    const w = newWallet();
    const { sign_in_input } = await nonceFor(w);
    const fromPage = createSignInMessage({ ...sign_in_input, domain: 'app.example.test', uri: 'https://app.example.test/login' });
    expect((await login(signInOutput(w, fromPage))).status).toBe(200);
    const other = await nonceFor(w);
    const phishing = createSignInMessage({ ...other.sign_in_input, domain: 'agents.example.test.evil.test' });
    const r = await login(signInOutput(w, phishing));
    expect(r.status).toBe(401);
    expect(r.body).toEqual({ error: expect.stringContaining('domain'), code: 'INVALID_SIGNATURE', status: 401 });
  });

  it('accepts a message built from an empty input (no nonce) once, while it is fresh', async () => {
    const w = newWallet();
    // What a wallet makes of an empty input: the page's domain, the account, and when it was issued.
    const message = createSignInMessage({ domain: 'agents.example.test', address: w.address, issuedAt: new Date().toISOString() });
    const out = signInOutput(w, message);
    expect((await login(out)).status).toBe(200);
    const replay = await login(out);
    expect(replay.status).toBe(401);
    expect(replay.body.code).toBe('NONCE_INVALID');
    // Without a time there is nothing to bound a replay by.
    const timeless = await login(signInOutput(w, createSignInMessage({ domain: 'agents.example.test', address: w.address })));
    expect(timeless.body).toMatchObject({ code: 'NONCE_INVALID', status: 401 });
    const stale = await login(
      signInOutput(w, createSignInMessage({ domain: 'agents.example.test', address: w.address, issuedAt: new Date(Date.now() - 3600_000).toISOString() })),
    );
    expect(stale.body.code).toBe('NONCE_INVALID');
  });

  it('signs in the account the user picked in the wallet, not the one the nonce was asked for', async () => {
    const asked = newWallet();
    const picked = newWallet();
    const { sign_in_input } = await nonceFor(asked);
    const r = await login(signInOutput(picked, createSignInMessage({ ...sign_in_input, address: picked.address })));
    expect(r.status, r.text).toBe(200);
    expect(r.body.wallet_address).toBe(picked.address);
    // The message must name the account that signed it.
    const { sign_in_input: again } = await nonceFor(asked);
    expect((await login(signInOutput(picked, createSignInMessage(again)))).body.code).toBe('INVALID_SIGNATURE');
  });

  it('accepts the message inside an off-chain message envelope (the newer off-chain message signing)', async () => {
    const w = newWallet();
    const { sign_in_input } = await nonceFor(w);
    const envelope = getOffchainMessageEncoder().encode({
      version: 1,
      requiredSignatories: [{ address: w.address as never }],
      content: createSignInMessageText(sign_in_input),
    });
    const r = await login(signInOutput(w, new Uint8Array(envelope)));
    expect(r.status, r.text).toBe(200);
    expect(r.body.wallet_address).toBe(w.address);
  });

  it('refuses a wrong or malformed chain id, a message for later, and a forged signature, saying why', async () => {
    const w = newWallet();
    const cases: [Partial<SolanaSignInInput>, RegExp][] = [
      [{ chainId: 'mainnet' }, /mainnet.*localnet/],
      [{ chainId: 'solana:localnet-2' }, /chain id/],
      [{ issuedAt: new Date(Date.now() + 3600_000).toISOString() }, /future/],
      [{ expirationTime: new Date(Date.now() - 1000).toISOString() }, /expired/],
    ];
    for (const [patch, why] of cases) {
      const { sign_in_input } = await nonceFor(w);
      const r = await login(signInOutput(w, createSignInMessage({ ...sign_in_input, ...patch })));
      expect(r.status, JSON.stringify(patch)).toBe(401);
      expect(r.body.error, JSON.stringify(patch)).toMatch(why);
    }
    const { sign_in_input } = await nonceFor(w);
    const message = createSignInMessage(sign_in_input);
    const forged = await login({ account: { address: w.address }, signedMessage: b64(message), signature: b64(newWallet().sign(message)) });
    expect(forged.body).toEqual({ error: expect.any(String), code: 'INVALID_SIGNATURE', status: 401 });
    // A body with neither shape is a 400 naming what is missing.
    expect((await login({ signedMessage: b64(message) })).body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
  });
});
