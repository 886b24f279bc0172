import { Connection, Keypair, PublicKey, Transaction, type TransactionInstruction } from '@solana/web3.js';
import {
  cancelInstruction,
  decodeSubscription,
  depositInstruction,
  findSubscriptionAddress,
  subscribeInstruction,
  tierId,
  type Subscription as ChainSubscription,
  waitConfirmed,
} from '@agenthost/subscription-program';
import type { Session, Wallet } from './wallet.ts';

export type TierArg = 'free' | 'pro' | 'enterprise' | 0 | 1 | 2;

/** What startStack({ devchain: true }) exposes about the chain it started. */
export interface StackChain {
  /** JSON-RPC URL (SOLANA_RPC_URL of billing-chain). */
  url: string;
  programId: string;
  treasury: string;
  /** Lamports per 30-day period. */
  prices: { free: number; pro: number; enterprise: number };
  /** Move the chain clock forward (seconds); returns the new chain time (unix seconds). */
  advanceClock(seconds: number): Promise<number>;
  /** Chain time, unix seconds. */
  now(): Promise<number>;
  /** Stop the chain (to test "chain down"); the stack's stop() also does it. */
  close(): Promise<void>;
}

/** Real signed transactions against the stack's devchain, as a wallet app would send them. */
export interface DevchainClient {
  connection: Connection;
  programId: PublicKey;
  treasury: PublicKey;
  keypair(wallet: Wallet): Keypair;
  /** requestAirdrop and wait until confirmed. */
  airdrop(address: string | PublicKey, lamports: number): Promise<void>;
  balance(address: string | PublicKey): Promise<number>;
  /** Sign with every signer (first = fee payer), send, and wait for `confirmed`. Returns the signature and meta.err. */
  send(instructions: TransactionInstruction[], signers: Keypair[], opts?: { skipPreflight?: boolean }): Promise<{ signature: string; err: unknown }>;
  subscribe(wallet: Wallet, tier: TierArg, opts?: { skipPreflight?: boolean }): Promise<{ signature: string; err: unknown }>;
  deposit(wallet: Wallet, lamports: bigint | number): Promise<{ signature: string; err: unknown }>;
  cancel(wallet: Wallet): Promise<{ signature: string; err: unknown }>;
  /** The wallet's subscription PDA. */
  subscriptionAddress(wallet: Wallet | string): PublicKey;
  /** The decoded on-chain record and the PDA's lamports (null when none). */
  subscription(wallet: Wallet | string): Promise<(ChainSubscription & { lamports: number }) | null>;
  /** Wait until a signature reaches `confirmed` (throws after timeoutMs). */
  confirm(signature: string, timeoutMs?: number): Promise<unknown>;
}

const toTier = (t: TierArg): 0 | 1 | 2 => (typeof t === 'number' ? t : tierId(t));
const pk = (a: string | PublicKey): PublicKey => (typeof a === 'string' ? new PublicKey(a) : a);

/** A stack as these helpers need it (stack.ts's Stack, without importing it back: no import cycle). */
type StackWithChain = { chain?: StackChain | undefined };

/** A client for the stack's devchain (startStack({ devchain: true })). */
export function chainClient(stack: StackWithChain): DevchainClient {
  const chain = stack.chain;
  if (!chain) throw new Error('this stack has no devchain: start it with startStack({ devchain: true, ... })');
  const connection = new Connection(chain.url, { commitment: 'confirmed' });
  const programId = new PublicKey(chain.programId);
  const treasury = new PublicKey(chain.treasury);
  const keypair = (w: Wallet) => Keypair.fromSecretKey(w.secretKey);

  const confirm = async (signature: string, timeoutMs = 15_000): Promise<unknown> => {
    const done = await waitConfirmed(connection, signature, { timeoutMs, everyMs: 50 });
    if (!done) throw new Error(`transaction ${signature} was not confirmed within ${timeoutMs} ms`);
    return done.err;
  };

  const send: DevchainClient['send'] = async (instructions, signers, opts = {}) => {
    const { blockhash, lastValidBlockHeight } = await connection.getLatestBlockhash('confirmed');
    const tx = new Transaction({ feePayer: signers[0]!.publicKey, blockhash, lastValidBlockHeight }).add(...instructions);
    tx.sign(...signers);
    const signature = await connection.sendRawTransaction(tx.serialize(), { skipPreflight: opts.skipPreflight ?? false, preflightCommitment: 'confirmed' });
    const err = await confirm(signature);
    return { signature, err };
  };

  const ownerParams = (w: Wallet) => ({ programId, owner: keypair(w).publicKey, treasury });
  const address = (w: Wallet | string) => findSubscriptionAddress(programId, new PublicKey(typeof w === 'string' ? w : w.address))[0];

  return {
    connection,
    programId,
    treasury,
    keypair,
    async airdrop(to, lamports) {
      const sig = await connection.requestAirdrop(pk(to), lamports);
      await confirm(sig);
    },
    balance: (a) => connection.getBalance(pk(a), 'confirmed'),
    send,
    subscribe: (w, tier, opts) => send([subscribeInstruction({ ...ownerParams(w), tier: toTier(tier) })], [keypair(w)], opts),
    deposit: (w, lamports) => send([depositInstruction({ ...ownerParams(w), lamports: BigInt(lamports) })], [keypair(w)]),
    cancel: (w) => send([cancelInstruction(ownerParams(w))], [keypair(w)]),
    subscriptionAddress: address,
    async subscription(w) {
      const info = await connection.getAccountInfo(address(w), 'confirmed');
      return info ? { ...decodeSubscription(info.data), lamports: info.lamports } : null;
    },
    confirm,
  };
}

export interface SubscribeOptions {
  /** Default 'pro'. */
  tier?: TierArg;
  /** Lamports airdropped to the wallet first (default: enough for the price, fees and rent, plus 1 SOL). 0 = none. */
  airdrop?: number;
  /** Prepaid balance deposited into the subscription after subscribing (for renewals). Default none. */
  deposit?: bigint | number;
  /** POST /subscription/register after the transaction (default true). */
  register?: boolean;
}

export interface Subscribed {
  tx_signature: string;
  /** The register response's subscription ({ tier, is_active, expires_at }); undefined with register: false. */
  subscription?: { tier: string; is_active: boolean; expires_at: string; cancelled: boolean };
  /** The whole register response body. */
  registered?: { success: boolean; subscription: { tier: string; is_active: boolean; expires_at: string; cancelled: boolean }; tx_verified: boolean };
}

/**
 * Subscribe a signed-in wallet for real: airdrop, a signed `subscribe` transaction on the stack's
 * devchain (confirmed), then POST /subscription/register through the gateway. Throws with the
 * response when register does not answer 200.
 *
 *   const stack = await startStack({ services: ['auth', 'billing-chain'], devchain: true });
 *   const s = await signIn(stack.api);
 *   await subscribe(stack, s, { tier: 'pro' });
 */
export async function subscribe(stack: StackWithChain, session: Session, opts: SubscribeOptions = {}): Promise<Subscribed> {
  const chain = chainClient(stack);
  const tier = toTier(opts.tier ?? 'pro');
  const price = [stack.chain!.prices.free, stack.chain!.prices.pro, stack.chain!.prices.enterprise][tier]!;
  const airdrop = opts.airdrop ?? price + Number(opts.deposit ?? 0) + 1_000_000_000;
  if (airdrop > 0) await chain.airdrop(session.wallet.address, airdrop);
  const sent = await chain.subscribe(session.wallet, tier);
  if (sent.err) throw new Error(`subscribe transaction failed: ${JSON.stringify(sent.err)}`);
  if (opts.deposit !== undefined && BigInt(opts.deposit) > 0n) {
    const d = await chain.deposit(session.wallet, opts.deposit);
    if (d.err) throw new Error(`deposit transaction failed: ${JSON.stringify(d.err)}`);
  }
  if (opts.register === false) return { tx_signature: sent.signature };
  const r = await session.api.post('/subscription/register', { tx_signature: sent.signature, tier });
  if (r.status !== 200) throw new Error(`register failed: ${r.status} ${r.text}`);
  return { tx_signature: sent.signature, subscription: r.body.subscription, registered: r.body };
}
