import { Connection, PublicKey, Transaction, type TransactionInstruction } from '@solana/web3.js';
import type { Wallet, WalletAccount } from '@wallet-standard/base';
import bs58 from 'bs58';
import { cancelInstruction, programErrorMessage, subscribeInstruction, waitConfirmed } from '@agenthost/subscription-program';
import { ApiError, type Api, type TierName } from './api.ts';
import { WalletDeclined } from './wallets.ts';

export type Limits = { instances: number; requests_per_day: number; requests_per_minute: number; storage_mb: number; memory_mb: number; cpus: number };

/** GET /config.json (served beside the page) with what it leaves out asked from devchain. */
export interface ChainConfig {
  rpcUrl: string;
  chain: string;
  programId: PublicKey;
  treasury: PublicKey;
  prices: Record<TierName, number>;
  tiers: Record<TierName, Limits>;
}

export async function loadConfig(): Promise<ChainConfig> {
  const c = (await (await fetch('/config.json')).json()) as {
    solana_rpc_url: string;
    solana_chain: string;
    program_id?: string;
    treasury?: string;
    prices?: Record<TierName, number>;
    tiers: Record<TierName, Limits>;
  };
  let { program_id, treasury, prices } = c;
  if (!program_id || !treasury || !prices) {
    // devchain publishes these; a real cluster's are set in the gateway's configuration (docs/dashboard.md).
    const res = await fetch(c.solana_rpc_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'devchain_getConfig' }),
    });
    const dc = ((await res.json()) as { result?: { programId: string; treasury: string; prices: Record<TierName, number> } }).result;
    if (!dc) throw new Error('The chain is not a devchain and the operator set no SUBSCRIPTION_PROGRAM_ID, TREASURY and DASHBOARD_TIER_PRICES_LAMPORTS.');
    program_id ??= dc.programId;
    treasury ??= dc.treasury;
    prices ??= dc.prices;
  }
  return { rpcUrl: c.solana_rpc_url, chain: c.solana_chain, programId: new PublicKey(program_id), treasury: new PublicKey(treasury), prices, tiers: c.tiers };
}

export const TIER_IDS: Record<TierName, 0 | 1 | 2> = { free: 0, pro: 1, enterprise: 2 };

export function balance(cfg: ChainConfig, address: string): Promise<number> {
  return new Connection(cfg.rpcUrl, 'confirmed').getBalance(new PublicKey(address), 'confirmed');
}

type SignAndSend = {
  signAndSendTransaction(
    ...i: { account: WalletAccount; chain: string; transaction: Uint8Array; options?: Record<string, unknown> }[]
  ): Promise<{ signature: Uint8Array }[]>;
};
type SignTx = { signTransaction(...i: { account: WalletAccount; chain: string; transaction: Uint8Array }[]): Promise<{ signedTransaction: Uint8Array }[]> };

/**
 * Build the transaction here, have the wallet sign and send it (solana:signAndSendTransaction, else
 * solana:signTransaction and we send it), then wait for `confirmed`. Throws a plain sentence on failure.
 */
async function signAndSend(cfg: ChainConfig, wallet: Wallet, account: WalletAccount, ix: TransactionInstruction): Promise<string> {
  const connection = new Connection(cfg.rpcUrl, 'confirmed');
  const { blockhash, lastValidBlockHeight } = await connection.getLatestBlockhash('confirmed');
  const tx = new Transaction({ feePayer: new PublicKey(account.address), blockhash, lastValidBlockHeight }).add(ix);
  const bytes = tx.serialize({ requireAllSignatures: false, verifySignatures: false });
  const features = wallet.features as Record<string, unknown>;
  let signature: string;
  try {
    const sas = features['solana:signAndSendTransaction'] as SignAndSend | undefined;
    const st = features['solana:signTransaction'] as SignTx | undefined;
    if (sas) {
      const [out] = await sas.signAndSendTransaction({ account, chain: cfg.chain, transaction: bytes, options: { preflightCommitment: 'confirmed' } });
      signature = bs58.encode(out!.signature);
    } else if (st) {
      const [out] = await st.signTransaction({ account, chain: cfg.chain, transaction: bytes });
      signature = await connection.sendRawTransaction(out!.signedTransaction, { preflightCommitment: 'confirmed' });
    } else {
      throw new Error(`${wallet.name} cannot sign transactions`);
    }
  } catch (err) {
    throw new WalletDeclined(`${wallet.name} did not sign or send the transaction (${chainError(err)}). Nothing was paid.`);
  }
  const done = await waitConfirmed(connection, signature, { timeoutMs: 60_000, everyMs: 500 });
  if (!done) throw new Error(`The transaction ${signature} was not confirmed within a minute. If it confirms later, press Refresh.`);
  if (done.err) throw new Error(`The transaction failed on chain: ${chainError(done.err)}. Nothing was paid.`);
  return signature;
}

/** A program error in words (its custom code), or the wallet's/RPC's own message. */
function chainError(err: unknown): string {
  const text = err instanceof Error ? err.message : JSON.stringify(err);
  const custom = /"Custom":\s*(\d+)/.exec(text) ?? /custom program error: 0x([0-9a-f]+)/i.exec(text);
  if (custom) return programErrorMessage(custom[0].includes('0x') ? parseInt(custom[1]!, 16) : Number(custom[1])) ?? text;
  if (/insufficient|Attempt to debit/i.test(text)) return 'the wallet does not hold enough SOL for the price and the fee';
  return text;
}

/** subscribe(tier) on chain (a renewal is the same instruction: it appends 30 days), then POST /subscription/register. */
export async function subscribe(api: Api, cfg: ChainConfig, wallet: Wallet, account: WalletAccount, tier: TierName): Promise<void> {
  const ix = subscribeInstruction({ programId: cfg.programId, owner: new PublicKey(account.address), treasury: cfg.treasury, tier: TIER_IDS[tier] });
  const signature = await signAndSend(cfg, wallet, account, ix);
  // The API may read the chain a moment behind the wallet's RPC: TRANSACTION_NOT_FOUND is retryable.
  for (let i = 0; ; i++) {
    try {
      await api.register(signature, TIER_IDS[tier]);
      return;
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 'TRANSACTION_NOT_FOUND') || i >= 10) throw err;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** cancel() on chain, then have the API re-read the chain (register takes only subscribe transactions). */
export async function cancel(api: Api, cfg: ChainConfig, wallet: Wallet, account: WalletAccount): Promise<void> {
  await signAndSend(cfg, wallet, account, cancelInstruction({ programId: cfg.programId, owner: new PublicKey(account.address), treasury: cfg.treasury }));
  await api.refresh();
}
