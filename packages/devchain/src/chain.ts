/**
 * The devchain bank: genesis, transaction intake (decode → sanitize → verify → preflight →
 * execute → commit), simulation and the faucet. Everything lives in memory.
 */
import { createHash, randomBytes } from 'node:crypto';
import { PublicKey, SystemProgram, Transaction, TransactionInstruction } from '@solana/web3.js';
import {
  AccountsDb,
  BPF_UPGRADEABLE_LOADER_ID,
  COMPUTE_BUDGET_PROGRAM_ID,
  MEMO_PROGRAM_ID,
  NATIVE_LOADER_ID,
  SYSTEM_PROGRAM_ID,
  rentExemptMinimum,
} from './accounts.ts';
import type { Account, AccountReader } from './accounts.ts';
import { SlotClock } from './clock.ts';
import type { Commitment } from './clock.ts';
import { keypairFromLabel } from './config.ts';
import type { DevchainConfig } from './config.ts';
import { b58encode } from './encoding.ts';
import { RpcCode, RpcError, preflightFailure, transactionErrorMessage } from './errors.ts';
import type { TransactionError } from './errors.ts';
import { Ledger } from './ledger.ts';
import type { TransactionRecord } from './ledger.ts';
import { PerfSamples } from './perf.ts';
import { computeBudgetProgram, memoProgram } from './programs/native.ts';
import { createSubscriptionProgram } from './programs/subscription.ts';
import { systemProgram } from './programs/system.ts';
import { executeTransaction } from './runtime.ts';
import type { ExecutionResult, Program } from './runtime.ts';
import { PACKET_DATA_SIZE, decodeTransaction, sanitize, verifySignatures } from './transaction.ts';
import type { DecodedTransaction } from './transaction.ts';

/** The faucet behind requestAirdrop: 4,000,000 SOL, keypair from sha256("agenthost-devchain-faucet"). */
export const FAUCET = keypairFromLabel('agenthost-devchain-faucet');
const FAUCET_LAMPORTS = 4_000_000_000_000_000n;

export interface SimulationOutcome {
  slot: number;
  result: ExecutionResult;
  replacementBlockhash?: { blockhash: string; lastValidBlockHeight: number };
}

function programAccount(owner: string, data: Uint8Array): Account {
  return { lamports: rentExemptMinimum(data.length), data, owner, executable: true };
}

export class Chain {
  readonly config: DevchainConfig;
  readonly clock: SlotClock;
  readonly accounts = new AccountsDb();
  readonly ledger = new Ledger();
  readonly programs: ReadonlyMap<string, Program>;
  readonly genesisHash = b58encode(randomBytes(32));
  readonly perf: PerfSamples;
  /** The addresses getClusterNodes gives for this node, known once the server listens ("host:port"). */
  contact: { rpc: string | null; pubsub: string | null } = { rpc: null, pubsub: null };
  private readonly txListeners: Array<(r: TransactionRecord) => void> = [];
  private airdropNonce = 0;

  constructor(config: DevchainConfig) {
    this.config = config;
    this.clock = new SlotClock(config.slotMs, config.finalizeSlots);
    this.perf = new PerfSamples(this.clock, this.ledger, config.perfSampleSeconds);
    const subscription = createSubscriptionProgram(config);
    this.programs = new Map<string, Program>([systemProgram, computeBudgetProgram, memoProgram, subscription].map((p) => [p.id, p]));
    // Genesis (slot 0).
    const text = (s: string) => new TextEncoder().encode(s);
    this.accounts.set(SYSTEM_PROGRAM_ID, programAccount(NATIVE_LOADER_ID, text('system_program')), 0);
    this.accounts.set(COMPUTE_BUDGET_PROGRAM_ID, programAccount(NATIVE_LOADER_ID, text('compute_budget_program')), 0);
    this.accounts.set(MEMO_PROGRAM_ID, programAccount('BPFLoader2111111111111111111111111111111111', text('spl_memo')), 0);
    // An upgradeable-loader "Program" account: u32 tag 2 + programdata address.
    const programState = new Uint8Array(36);
    programState[0] = 2;
    programState.set(createHash('sha256').update(`programdata:${config.programId}`).digest(), 4);
    this.accounts.set(config.programId, programAccount(BPF_UPGRADEABLE_LOADER_ID, programState), 0);
    this.accounts.set(FAUCET.publicKey.toBase58(), { lamports: FAUCET_LAMPORTS, data: new Uint8Array(), owner: SYSTEM_PROGRAM_ID, executable: false }, 0);
    this.clock.onSlot(() => this.accounts.prune(this.clock.commitmentSlot('finalized')));
  }

  onTransaction(fn: (r: TransactionRecord) => void): void {
    this.txListeners.push(fn);
  }

  reader(c: Commitment): AccountReader {
    return this.accounts.reader(this.clock.commitmentSlot(c));
  }

  /** Decode + sanitize, with agave's RPC errors. */
  decode(raw: Uint8Array): DecodedTransaction {
    if (raw.length > PACKET_DATA_SIZE) {
      throw new RpcError(RpcCode.InvalidParams, `transaction too large: ${raw.length} bytes (max: ${PACKET_DATA_SIZE} bytes)`);
    }
    let tx: DecodedTransaction;
    try {
      tx = decodeTransaction(raw);
    } catch (e) {
      throw new RpcError(RpcCode.InvalidParams, `failed to deserialize solana_sdk::transaction::versioned::VersionedTransaction: ${(e as Error).message}`);
    }
    const err = sanitize(tx);
    if (err !== null) throw new RpcError(RpcCode.InvalidParams, `invalid transaction: ${transactionErrorMessage(err)}`);
    return tx;
  }

  private execute(tx: DecodedTransaction, read: AccountReader): ExecutionResult {
    return executeTransaction({ tx, read, programs: this.programs, now: this.clock.now() });
  }

  /**
   * sendTransaction. Invalid signatures, unknown/expired blockhashes, replays and unpayable
   * fees are rejected with the errors agave returns (-32003 / -32002) and never land — also
   * with skipPreflight (agave would accept and silently drop them). A transaction whose
   * instruction fails lands (fee charged, meta.err set) when preflight is skipped;
   * otherwise preflight reports the failure, as on Solana.
   */
  submit(raw: Uint8Array, opts: { skipPreflight: boolean; preflightCommitment: Commitment }): string {
    const tx = this.decode(raw);
    if (!verifySignatures(tx)) throw new RpcError(RpcCode.TransactionSignatureVerificationFailure, 'Transaction signature verification failure');
    const signature = tx.signatureIds[0] as string;
    if (this.ledger.has(signature)) throw preflightFailure('AlreadyProcessed', []);
    if (!opts.skipPreflight) {
      const slot = this.clock.commitmentSlot(opts.preflightCommitment);
      if (!this.clock.isBlockhashValid(tx.recentBlockhash, slot)) throw preflightFailure('BlockhashNotFound', []);
      const sim = this.execute(tx, this.accounts.reader(slot));
      if (sim.kind === 'rejected') throw preflightFailure(sim.err, []);
      if (sim.err !== null) throw preflightFailure(sim.err, sim.logs, sim.unitsConsumed);
    }
    if (!this.clock.isBlockhashValid(tx.recentBlockhash)) throw preflightFailure('BlockhashNotFound', []);
    const result = this.execute(tx, this.accounts.reader());
    if (result.kind === 'rejected') throw preflightFailure(result.err, []);
    const slot = this.clock.slot;
    for (const [key, account] of result.writes) this.accounts.set(key, account, slot);
    const record: TransactionRecord = {
      signature,
      slot,
      tx,
      err: result.err,
      fee: result.fee,
      preBalances: result.preBalances,
      postBalances: result.postBalances,
      logs: result.logs,
      innerInstructions: result.innerInstructions,
      unitsConsumed: result.unitsConsumed,
      memo: memoOf(tx),
    };
    this.ledger.add(record);
    for (const fn of this.txListeners) fn(record);
    return signature;
  }

  /** simulateTransaction: runs against the state at `commitment` and commits nothing. */
  simulate(raw: Uint8Array, opts: { sigVerify: boolean; replaceRecentBlockhash: boolean; commitment: Commitment }): SimulationOutcome {
    let tx = this.decode(raw);
    if (opts.sigVerify && !verifySignatures(tx)) {
      throw new RpcError(RpcCode.TransactionSignatureVerificationFailure, 'Transaction signature verification failure');
    }
    const slot = this.clock.commitmentSlot(opts.commitment);
    let replacementBlockhash: SimulationOutcome['replacementBlockhash'];
    if (opts.replaceRecentBlockhash) {
      const latest = this.clock.latestBlockhash(opts.commitment);
      replacementBlockhash = { blockhash: latest.blockhash, lastValidBlockHeight: latest.lastValidBlockHeight };
      tx = { ...tx, recentBlockhash: latest.blockhash };
    } else if (!this.clock.isBlockhashValid(tx.recentBlockhash, slot)) {
      return { slot, result: { kind: 'rejected', err: 'BlockhashNotFound' } };
    }
    return { slot, result: this.execute(tx, this.accounts.reader(slot)), replacementBlockhash };
  }

  /** requestAirdrop: a real, signed System transfer from the faucet. */
  airdrop(to: string, lamports: bigint): string {
    const build = (nonce: number | null): Uint8Array => {
      const { blockhash, lastValidBlockHeight } = this.clock.latestBlockhash('processed');
      const t = new Transaction({ feePayer: FAUCET.publicKey, blockhash, lastValidBlockHeight });
      t.add(SystemProgram.transfer({ fromPubkey: FAUCET.publicKey, toPubkey: new PublicKey(to), lamports }));
      // Identical airdrops in one slot would be identical transactions: make them unique.
      if (nonce !== null) t.add(new TransactionInstruction({ programId: new PublicKey(MEMO_PROGRAM_ID), keys: [], data: Buffer.from(`airdrop ${nonce}`) }));
      t.sign(FAUCET);
      return t.serialize();
    };
    let raw = build(null);
    if (this.ledger.has(b58encode(decodeTransaction(raw).signatures[0] as Uint8Array))) raw = build(++this.airdropNonce);
    try {
      return this.submit(raw, { skipPreflight: false, preflightCommitment: 'processed' });
    } catch (e) {
      if (e instanceof RpcError) {
        const err = (e.data as { err?: TransactionError } | undefined)?.err;
        throw new RpcError(RpcCode.InternalError, `airdrop request failed: ${err !== undefined ? transactionErrorMessage(err) : e.message}`);
      }
      throw e;
    }
  }
}

function memoOf(tx: DecodedTransaction): string | null {
  const memos = tx.instructions
    .filter((ix) => tx.accountKeys[ix.programIdIndex] === MEMO_PROGRAM_ID)
    .map((ix) => `[${ix.data.length}] ${new TextDecoder().decode(ix.data)}`);
  return memos.length ? memos.join('; ') : null;
}
