import bs58 from 'bs58';
import { parseSignInMessageText, verifySignIn } from '@solana/wallet-standard-util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newWallet, startStack, type Stack } from '@agenthost/testkit';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ services: ['auth'], serviceEnv: { auth: { SIWS_DOMAIN: 'agents.example.test', SIWS_URI: 'https://agents.example.test' } } });
});
afterAll(async () => {
  await stack?.stop();
});

describe('Sign-In With Solana message', () => {
  it('is accepted by a third-party SIWS verifier (@solana/wallet-standard-util verifySignIn)', async () => {
    const w = newWallet();
    const n = await stack.api.get(`/auth/nonce?wallet_address=${w.address}`);
    const message: string = n.body.message;
    const signedMessage = new TextEncoder().encode(message);
    const signature = w.sign(signedMessage);
    const issuedAt = /Issued At: (.*)/.exec(message)![1]!;
    const ok = verifySignIn(
      {
        domain: 'agents.example.test',
        address: w.address,
        statement: 'Sign in to agenthost.',
        uri: 'https://agents.example.test',
        version: '1',
        chainId: 'localnet',
        nonce: n.body.nonce,
        issuedAt,
        expirationTime: n.body.expires_at,
      },
      { account: { address: w.address, publicKey: bs58.decode(w.address), chains: [], features: [] }, signedMessage, signature },
    );
    expect(ok).toBe(true);
    // The verifier compares fields: a different nonce must not pass.
    const tampered = verifySignIn(
      { domain: 'agents.example.test', address: w.address, nonce: 'somethingelse', issuedAt },
      { account: { address: w.address, publicKey: bs58.decode(w.address), chains: [], features: [] }, signedMessage, signature },
    );
    expect(tampered).toBe(false);
    // And our server accepts the same signature.
    const login = await stack.api.post('/auth/login', { wallet_address: w.address, signature_base58: bs58.encode(signature), nonce: n.body.nonce });
    expect(login.status).toBe(200);
  });

  it('names the domain, address, nonce and both times, and a 5 minute lifetime', async () => {
    const w = newWallet();
    const n = await stack.api.get(`/auth/nonce?wallet_address=${w.address}`);
    expect(n.body.message).toContain(`agents.example.test wants you to sign in with your Solana account:\n${w.address}\n`);
    expect(n.body.message).toContain(`Nonce: ${n.body.nonce}`);
    expect(bs58.decode(n.body.nonce).length).toBeGreaterThanOrEqual(16);
    const issued = Date.parse(/Issued At: (.*)/.exec(n.body.message)![1]!);
    expect(Date.parse(n.body.expires_at) - issued).toBe(300_000);
  });

  it('is a message the SIWS format allows, chain id included, as a wallet library parses it', async () => {
    const w = newWallet();
    const n = await stack.api.get(`/auth/nonce?wallet_address=${w.address}`);
    const parsed = parseSignInMessageText(n.body.message);
    expect(parsed).toMatchObject({ domain: 'agents.example.test', address: w.address, chainId: 'localnet', nonce: n.body.nonce, version: '1' });
  });
});
