import { setTimeout as sleep } from 'node:timers/promises';
import { Connection, Keypair, PublicKey, Transaction, VersionedTransaction, type Finality } from '@solana/web3.js';
import { decodeSubscription, findSubscriptionAddress, renewInstruction } from '@agenthost/subscription-program';
import { AppError, type Logger } from '@agenthost/shared';
import { chainClock, observedFetch } from '../metrics.ts';
import { customCode, factsOf, lastOwnerAction, type TxFacts } from './transactions.ts';

/** The on-chain subscription record of a wallet, verified (owner program, address, discriminator, owner). */
export interface ChainSubscription {
  wallet: string;
  pda: string;
  tier: number;
  expiresAt: number;
  isActive: boolean;
  lamports: number;
}

export interface SignatureInfo {
  signature: string;
  slot: number;
  err: unknown;
}

export interface ChainOptions {
  url: string;
  programId: string;
  treasury: string;
  commitment: Finality;
  timeoutMs: number;
  log: Logger;
}

const unavailable = (what: string, cause: unknown) =>
  new AppError('CHAIN_UNAVAILABLE', `The blockchain RPC could not ${what}; retry shortly`, { cause, retryable: true, retryAfter: 2 });

/**
 * Everything billing-chain asks the Solana cluster, through @solana/web3.js over JSON-RPC only (so
 * devchain, devnet and mainnet are interchangeable). Every call has a deadline; any transport or RPC
 * failure becomes CHAIN_UNAVAILABLE (503, retryable). Landed transactions are immutable, so their
 * decoded facts are memoised.
 */
export class ChainClient {
  readonly connection: Connection;
  readonly programId: PublicKey;
  readonly treasury: PublicKey;
  readonly commitment: Finality;
  private readonly opts: ChainOptions;
  private readonly txMemo = new Map<string, TxFacts>();
  private clockMode: 'devchain' | 'blocktime' | 'local' | undefined;
  /** chain time - local time, in ms, from the last clock reading. */
  private offsetMs = 0;
  /** When the chain clock was last read (ms since epoch; 0: never). */
  private clockReadAt = 0;

  constructor(opts: ChainOptions) {
    this.opts = opts;
    this.programId = new PublicKey(opts.programId);
    this.treasury = new PublicKey(opts.treasury);
    this.commitment = opts.commitment;
    const timeoutMs = opts.timeoutMs;
    this.connection = new Connection(opts.url, {
      commitment: opts.commitment,
      disableRetryOnRateLimit: true,
      fetch: observedFetch(timeoutMs),
    });
    chainClock(() => ({ offsetMs: this.offsetMs, readAt: this.clockReadAt }));
  }

  private async rpc<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof AppError) throw err;
      this.opts.log.warn({ rpc: what, reason: (err as Error)?.message?.slice(0, 200) }, 'solana rpc call failed');
      throw unavailable(what, err);
    }
  }

  /** A raw JSON-RPC call (for devchain_* methods that web3.js does not know). */
  async rawRpc(method: string, params: unknown[] = []): Promise<{ result?: unknown; error?: { code: number; message: string } }> {
    const res = await fetch(this.opts.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      signal: AbortSignal.timeout(this.opts.timeoutMs),
    });
    return (await res.json()) as { result?: unknown; error?: { code: number; message: string } };
  }

  pdaOf(wallet: string): string {
    return findSubscriptionAddress(this.programId, new PublicKey(wallet))[0].toBase58();
  }

  /** The transaction at the configured commitment, or null when unknown or not yet confirmed. */
  async transaction(signature: string): Promise<TxFacts | null> {
    const memo = this.txMemo.get(signature);
    if (memo) return memo;
    const resp = await this.rpc('read the transaction', () =>
      this.connection.getTransaction(signature, { commitment: this.commitment, maxSupportedTransactionVersion: 0 }),
    );
    if (!resp) return null;
    const facts = factsOf(signature, resp);
    if (this.txMemo.size > 5000) this.txMemo.delete(this.txMemo.keys().next().value!);
    this.txMemo.set(signature, facts);
    return facts;
  }

  /**
   * The wallet's subscription account, verified: owned by the program, at the PDA of
   * ["subscription", wallet], with the account discriminator, and recording this wallet as owner.
   * Null when the account does not exist. A wrong account is SUBSCRIPTION_ACCOUNT_INVALID.
   */
  async subscription(wallet: string): Promise<ChainSubscription | null> {
    const owner = new PublicKey(wallet);
    const [pda] = findSubscriptionAddress(this.programId, owner);
    const info = await this.rpc('read the subscription account', () => this.connection.getAccountInfo(pda, this.commitment));
    if (!info) return null;
    const invalid = (why: string) => {
      this.opts.log.warn({ wallet_address: wallet, pda: pda.toBase58(), why }, 'subscription account failed verification');
      return new AppError('SUBSCRIPTION_ACCOUNT_INVALID');
    };
    if (!info.owner.equals(this.programId)) throw invalid('not owned by the subscription program');
    let decoded;
    try {
      decoded = decodeSubscription(info.data);
    } catch (err) {
      throw invalid((err as Error).message);
    }
    if (!decoded.owner.equals(owner)) throw invalid('records another owner');
    const [expected] = findSubscriptionAddress(this.programId, decoded.owner);
    if (!expected.equals(pda)) throw invalid('address is not the PDA of its owner');
    return { wallet, pda: pda.toBase58(), tier: decoded.tier, expiresAt: decoded.expiresAt, isActive: decoded.isActive, lamports: info.lamports };
  }

  /** Newest first, at the configured commitment; `until` excluded. */
  async signatures(address: string, opts: { until?: string; before?: string; limit?: number }): Promise<SignatureInfo[]> {
    const list = await this.rpc('list signatures', () =>
      this.connection.getSignaturesForAddress(new PublicKey(address), { until: opts.until, before: opts.before, limit: opts.limit ?? 1000 }, this.commitment),
    );
    return list.map((s) => ({ signature: s.signature, slot: s.slot, err: s.err }));
  }

  /**
   * Whether the subscription is cancelled. The program keeps the mark privately (the account layout
   * has no field for it), so it is read from the PDA's history: the newest successful subscribe or
   * cancel decides. Null when the recent history (limit) holds neither.
   */
  async cancelledFromHistory(wallet: string, limit = 25): Promise<boolean | null> {
    const pda = this.pdaOf(wallet);
    for (const s of await this.signatures(pda, { limit })) {
      if (s.err !== null) continue;
      const tx = await this.transaction(s.signature);
      if (!tx || tx.err !== null) continue;
      const decided = lastOwnerAction(tx, this.programId.toBase58(), wallet);
      if (decided === 'subscribe') return false;
      if (decided === 'cancel') return true;
    }
    return null;
  }

  /** Chain time in ms: devchain's clock, else the block time of the latest slot, else local time. */
  async now(): Promise<number> {
    try {
      if (this.clockMode === undefined || this.clockMode === 'devchain') {
        const r = await this.rawRpc('devchain_getClock');
        const ts = (r.result as { unixTimestamp?: number } | undefined)?.unixTimestamp;
        if (typeof ts === 'number') {
          this.clockMode = 'devchain';
          this.offsetMs = ts * 1000 - Date.now();
          this.clockReadAt = Date.now();
          return ts * 1000;
        }
        this.clockMode = 'blocktime';
      }
      if (this.clockMode === 'blocktime') {
        const slot = await this.connection.getSlot(this.commitment);
        const t = await this.connection.getBlockTime(slot);
        if (typeof t === 'number') {
          this.offsetMs = t * 1000 - Date.now();
          this.clockReadAt = Date.now();
          return t * 1000;
        }
        this.clockMode = 'local';
      }
    } catch (err) {
      if (this.clockMode === 'blocktime') this.clockMode = 'local';
      this.opts.log.debug({ reason: (err as Error).message }, 'chain clock unavailable; using the last known offset');
    }
    return Date.now() + this.offsetMs;
  }

  /** Chain time estimated from the last reading (no RPC). */
  estimatedNow(): number {
    return Date.now() + this.offsetMs;
  }

  async balance(address: PublicKey): Promise<number> {
    return this.rpc('read a balance', () => this.connection.getBalance(address, this.commitment));
  }

  async airdrop(address: PublicKey, lamports: number): Promise<void> {
    const sig = await this.rpc('request an airdrop', () => this.connection.requestAirdrop(address, lamports));
    await this.waitConfirmed(sig, 10_000);
  }

  /**
   * Send renew for a wallet, paid and signed by the keeper. Simulated first, so a renewal that is not
   * due (or of an inactive subscription) never lands: returns the program's custom error code then.
   */
  async renew(keeper: Keypair, wallet: string): Promise<{ signature: string } | { programError: number | null; err: unknown }> {
    const ix = renewInstruction({ programId: this.programId, caller: keeper.publicKey, owner: new PublicKey(wallet), treasury: this.treasury });
    const { blockhash, lastValidBlockHeight } = await this.rpc('get a blockhash', () => this.connection.getLatestBlockhash(this.commitment));
    const tx = new Transaction({ feePayer: keeper.publicKey, blockhash, lastValidBlockHeight }).add(ix);
    tx.sign(keeper);
    const raw = tx.serialize();
    const sim = await this.rpc('simulate renew', () =>
      this.connection.simulateTransaction(new VersionedTransaction(tx.compileMessage()), { commitment: this.commitment }),
    );
    if (sim.value.err) return { programError: customCode(sim.value.err), err: sim.value.err };
    const signature = await this.rpc('send renew', () => this.connection.sendRawTransaction(raw, { skipPreflight: true }));
    const status = await this.waitConfirmed(signature, 15_000);
    if (status.err) return { programError: customCode(status.err), err: status.err };
    return { signature };
  }

  /** Poll the signature status until it reaches the configured commitment. */
  async waitConfirmed(signature: string, timeoutMs: number): Promise<{ err: unknown }> {
    const deadline = Date.now() + timeoutMs;
    const wanted = this.commitment === 'finalized' ? ['finalized'] : ['confirmed', 'finalized'];
    for (;;) {
      const { value } = await this.rpc('read a signature status', () => this.connection.getSignatureStatuses([signature]));
      const st = value[0];
      if (st?.confirmationStatus && wanted.includes(st.confirmationStatus)) return { err: st.err };
      if (Date.now() > deadline) throw unavailable('confirm a transaction in time', new Error(`${signature} not confirmed`));
      await sleep(100);
    }
  }
}

/** KEEPER_SECRET_KEY: base58 (64-byte secret key) or a JSON byte array. */
export function parseSecretKey(text: string, decodeBase58: (s: string) => Uint8Array): Keypair {
  const t = text.trim();
  const bytes = t.startsWith('[') ? Uint8Array.from(JSON.parse(t) as number[]) : decodeBase58(t);
  if (bytes.length === 64) return Keypair.fromSecretKey(bytes);
  if (bytes.length === 32) return Keypair.fromSeed(bytes);
  throw new Error('KEEPER_SECRET_KEY must be a 64-byte secret key (or 32-byte seed), base58 or a JSON array');
}
