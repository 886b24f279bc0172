import { getWallets } from '@wallet-standard/app';
import type { Wallet, WalletAccount } from '@wallet-standard/base';
import bs58 from 'bs58';
import { ApiError, type Api, type Login, type Session, type SignInInput } from './api.ts';

/**
 * Wallet Standard discovery: any wallet that registers itself on the page (Phantom, Solflare, Backpack, a
 * test wallet) appears. The Solana feature shapes are written out here rather than taken from
 * @solana/wallet-standard-features, to keep the bundle to what the page calls.
 */
type SignIn = { signIn(...inputs: SignInInput[]): Promise<{ account: WalletAccount; signedMessage: Uint8Array; signature: Uint8Array }[]> };
type SignMessage = {
  signMessage(...inputs: { account: WalletAccount; message: Uint8Array }[]): Promise<{ signedMessage: Uint8Array; signature: Uint8Array }[]>;
};
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

export const walletByName = (name: string): Wallet | undefined =>
  getWallets()
    .get()
    .find((w) => w.name === name);

/** The wallet's account for `address` (connecting first, silently when the wallet allows). */
export async function accountOf(wallet: Wallet, address?: string): Promise<WalletAccount> {
  let accounts = wallet.accounts;
  if (!accounts.length || (address && !accounts.some((a) => a.address === address))) {
    accounts = (await feature<Connect>(wallet, 'standard:connect')!.connect()).accounts;
  }
  const account = address ? accounts.find((a) => a.address === address) : accounts[0];
  if (!account)
    throw new Error(
      address ? `The wallet ${wallet.name} does not hold the account ${address} you signed in with.` : `The wallet ${wallet.name} shared no account.`,
    );
  return account;
}

/** A wallet refused or failed to sign: said as such, whatever the wallet's own wording. */
export class WalletDeclined extends Error {}

/**
 * connect → nonce → solana:signIn with the nonce's sign_in_input, its domain and URI this page's, where the wallet
 * has it (the wallet builds and shows the message; auth checks its fields), else solana:signMessage on the nonce's
 * message → login.
 */
export async function signInWithWallet(api: Api, wallet: Wallet): Promise<Session> {
  let account: WalletAccount;
  try {
    account = await accountOf(wallet);
  } catch (err) {
    throw new WalletDeclined(`${wallet.name} did not connect (${(err as Error).message}). You are not signed in.`);
  }
  const n = await api.nonce(account.address);
  let login: Login | undefined;
  try {
    const siws = feature<SignIn>(wallet, 'solana:signIn');
    const sm = feature<SignMessage>(wallet, 'solana:signMessage');
    if (siws) {
      // Bound to this page, as Sign-In With Solana has it and wallets check (Phantom refuses or warns on another
      // domain): the server's defaults name its own idea of the dashboard's origin, which may not be where the page is.
      const [out] = await siws.signIn({ ...n.sign_in_input, domain: location.host, uri: location.origin });
      if (out) login = { account: { address: out.account.address }, signedMessage: base64(out.signedMessage), signature: base64(out.signature) };
    } else if (sm) {
      const [out] = await sm.signMessage({ account, message: new TextEncoder().encode(n.message) });
      if (out) login = { wallet_address: account.address, signature_base58: bs58.encode(out.signature), nonce: n.nonce };
    }
  } catch (err) {
    throw new WalletDeclined(`${wallet.name} did not sign (${(err as Error).message}). You are not signed in.`);
  }
  if (!login) throw new WalletDeclined(`${wallet.name} returned no signature. You are not signed in.`);
  try {
    return await api.login(login);
  } catch (err) {
    // A page away from the origin the service signs in for (e.g. the gateway's own port): say where it is.
    const home = n.sign_in_input.domain;
    if (err instanceof ApiError && err.code === 'INVALID_SIGNATURE' && home.toLowerCase() !== location.host.toLowerCase())
      err.hint = `This service signs in on ${n.sign_in_input.uri}: open the dashboard there.`;
    throw err;
  }
}

const base64 = (bytes: Uint8Array): string => btoa(String.fromCharCode(...bytes));
