import bs58 from 'bs58';
import nacl from 'tweetnacl';
import type { ApiClient } from './http.ts';
import { recordSecret } from './secrets.ts';

export interface Wallet {
  address: string;
  secretKey: Uint8Array;
  sign(message: Uint8Array | string): Uint8Array;
}

export function newWallet(seed?: Uint8Array): Wallet {
  const kp = seed ? nacl.sign.keyPair.fromSeed(seed) : nacl.sign.keyPair();
  recordSecret(bs58.encode(kp.secretKey));
  return {
    address: bs58.encode(kp.publicKey),
    secretKey: kp.secretKey,
    sign: (m) => nacl.sign.detached(typeof m === 'string' ? new TextEncoder().encode(m) : m, kp.secretKey),
  };
}

export interface Session {
  token: string;
  user_id: string;
  wallet: Wallet;
  api: ApiClient;
}

/** nonce → sign the server's message → login → JWT, through the public API. */
export async function signIn(api: ApiClient, wallet: Wallet = newWallet()): Promise<Session> {
  const n = await api.get(`/auth/nonce?wallet_address=${wallet.address}`);
  if (n.status !== 200) throw new Error(`nonce failed: ${n.status} ${n.text}`);
  const signature = bs58.encode(wallet.sign(n.body.message));
  recordSecret(signature);
  const l = await api.post('/auth/login', { wallet_address: wallet.address, signature_base58: signature, nonce: n.body.nonce });
  if (l.status !== 200) throw new Error(`login failed: ${l.status} ${l.text}`);
  recordSecret(l.body.token);
  return { token: l.body.token, user_id: l.body.user_id, wallet, api: api.withToken(l.body.token) };
}
