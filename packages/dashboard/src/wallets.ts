import { getWallets } from '@wallet-standard/app';
import type { Wallet, WalletAccount } from '@wallet-standard/base';
import bs58 from 'bs58';
import type { Api, Session } from './api.ts';

/**
 * Wallet Standard discovery: any wallet that registers itself on the page (Phantom, Solflare, Backpack, a
 * test wallet) appears. The Solana feature shapes are written out here rather than taken from
 * @solana/wallet-standard-features, to keep the bundle to what the page calls.
 */
interface SignInInput {
  domain?: string;
  address?: string;
  statement?: string;
  uri?: string;
  version?: string;
  chainId?: string;
  nonce?: string;
  issuedAt?: string;
  expirationTime?: string;
}
type SignIn = { signIn(...inputs: SignInInput[]): Promise<{ account: WalletAccount; signedMessage: Uint8Array; signature: Uint8Array }[]> };
type SignMessage = { signMessage(...inputs: { account: WalletAccount; message: Uint8Array }[]): Promise<{ signedMessage: Uint8Array; signature: Uint8Array }[]> };
type Connect = { connect(input?: { silent?: boolean }): Promise<{ accounts: readonly WalletAccount[] }> };

const feature = <T>(w: Wallet, name: string): T | undefined => (w.features as Record<string, unknown>)[name] as T | undefined;

/** Wallets that can connect and sign a sign-in message. */
export function signInWallets(): Wallet[] {
  return getWallets()
    .get()
    .filter((w) => feature(w, 'standard:connect') && (feature(w, 'solana:signIn') || feature(w, 'solana:signMessage')));
}

/** Called whenever a wallet registers or leaves; returns the unsubscribe function. */
export function onWalletsChanged(cb: () => void): () => void {
  const api = getWallets();
  const offs = [api.on('register', cb), api.on('unregister', cb)];
  return () => offs.forEach((off) => off());
}

export const walletByName = (name: string): Wallet | undefined => getWallets().get().find((w) => w.name === name);

/** The wallet's account for `address` (connecting first, silently when the wallet allows). */
export async function accountOf(wallet: Wallet, address?: string): Promise<WalletAccount> {
  let accounts = wallet.accounts;
  if (!accounts.length || (address && !accounts.some((a) => a.address === address))) {
    accounts = (await feature<Connect>(wallet, 'standard:connect')!.connect()).accounts;
  }
  const account = address ? accounts.find((a) => a.address === address) : accounts[0];
  if (!account) throw new Error(address ? `The wallet ${wallet.name} does not hold the account ${address} you signed in with.` : `The wallet ${wallet.name} shared no account.`);
  return account;
}

/** The fields of the server's Sign-In With Solana message, so that a wallet's solana:signIn builds the same text. */
export function signInFields(message: string): SignInInput {
  const lines = message.split('\n');
  const field = (label: string) => lines.find((l) => l.startsWith(`${label}: `))?.slice(label.length + 2);
  return {
    domain: lines[0]!.replace(/ wants you to sign in with your Solana account:$/, ''),
    address: lines[1],
    statement: lines[3],
    uri: field('URI'),
    version: field('Version'),
    chainId: field('Chain ID'),
    nonce: field('Nonce'),
    issuedAt: field('Issued At'),
    expirationTime: field('Expiration Time'),
  };
}

/** A wallet refused or failed to sign: said as such, whatever the wallet's own wording. */
export class WalletDeclined extends Error {}

/**
 * connect → nonce → solana:signIn where the wallet has it (checked to have signed exactly the server's message),
 * else solana:signMessage on the nonce's message → login.
 */
export async function signInWithWallet(api: Api, wallet: Wallet): Promise<Session> {
  let account: WalletAccount;
  try {
    account = await accountOf(wallet);
  } catch (err) {
    throw new WalletDeclined(`${wallet.name} did not connect (${(err as Error).message}). You are not signed in.`);
  }
  const n = await api.nonce(account.address);
  const expected = new TextEncoder().encode(n.message);
  let signature: Uint8Array | undefined;
  try {
    const siws = feature<SignIn>(wallet, 'solana:signIn');
    if (siws) {
      const [out] = await siws.signIn(signInFields(n.message));
      if (out && out.account.address === account.address && sameBytes(out.signedMessage, expected)) signature = out.signature;
    }
    const sm = feature<SignMessage>(wallet, 'solana:signMessage');
    if (!signature && sm) signature = (await sm.signMessage({ account, message: expected }))[0]?.signature;
  } catch (err) {
    throw new WalletDeclined(`${wallet.name} did not sign (${(err as Error).message}). You are not signed in.`);
  }
  if (!signature) throw new WalletDeclined(`${wallet.name} signed a different sign-in message from the one agenthost issued, and cannot sign a plain message. You are not signed in.`);
  return api.login({ wallet_address: account.address, signature_base58: bs58.encode(signature), nonce: n.nonce });
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);
