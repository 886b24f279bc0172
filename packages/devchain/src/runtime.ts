/**
 * Executes one transaction against a snapshot of accounts: fee, instructions (atomically),
 * runtime invariants and the rent-state rule. Produces the writes to commit; it never
 * touches the store itself, so the same code runs for simulation and for landing.
 */
import { SYSTEM_PROGRAM_ID, rentExemptMinimum } from './accounts.ts';
import type { Account, AccountReader } from './accounts.ts';
import { instructionErrorMessage } from './errors.ts';
import type { InstructionError, TransactionError } from './errors.ts';
import { isSigner, isWritable } from './transaction.ts';
import type { CompiledInstruction, DecodedTransaction } from './transaction.ts';

export const LAMPORTS_PER_SIGNATURE = 5000n;
const CU_LIMIT_PER_INSTRUCTION = 200_000;

export interface AccountMeta {
  key: string;
  isSigner: boolean;
  isWritable: boolean;
}

export interface InstructionContext {
  programId: string;
  accounts: AccountMeta[];
  data: Uint8Array;
  /** Unix seconds of the chain clock. */
  now: number;
  /** Current state of an account (a private copy; write it back with set). */
  get(key: string): Account | null;
  set(key: string, account: Account): void;
  /** Appends "Program log: <msg>" (builtins log the bare message, as agave's native programs do). */
  log(msg: string): void;
  consume(units: number): void;
  /** Cross-program invocation (e.g. the System Program), logged and recorded as an inner instruction. */
  invoke(programId: string, accounts: AccountMeta[], data: Uint8Array): InstructionError | null;
}

export interface Program {
  id: string;
  /** Builtins (system, compute budget) do not log compute units. */
  builtin: boolean;
  execute(ctx: InstructionContext): InstructionError | null;
}

export interface InnerInstructions {
  index: number;
  instructions: Array<CompiledInstruction & { stackHeight: number }>;
}

export type ExecutionResult =
  | { kind: 'rejected'; err: TransactionError }
  | {
      kind: 'executed';
      err: TransactionError | null;
      fee: bigint;
      writes: Map<string, Account>;
      preBalances: bigint[];
      postBalances: bigint[];
      logs: string[];
      innerInstructions: InnerInstructions[];
      unitsConsumed: number;
    };

function feeFor(tx: DecodedTransaction): bigint {
  return LAMPORTS_PER_SIGNATURE * BigInt(tx.header.numRequiredSignatures);
}

type RentState = 'uninitialized' | 'paying' | 'exempt';
function rentState(a: Account | null): RentState {
  if (!a || a.lamports === 0n) return 'uninitialized';
  return a.lamports >= rentExemptMinimum(a.data.length) ? 'exempt' : 'paying';
}

function rentTransitionAllowed(pre: Account | null, post: Account | null): boolean {
  const after = rentState(post);
  if (after !== 'paying') return true;
  // A rent-paying account may stay rent-paying only if it does not grow or change size.
  return rentState(pre) === 'paying' && pre!.data.length === post!.data.length && post!.lamports <= pre!.lamports;
}

const copy = (a: Account): Account => ({ ...a, data: a.data.slice() });

function sameAccount(a: Account | null, b: Account | null): boolean {
  if (a === b) return true;
  if (!a || !b) return (a?.lamports ?? 0n) === 0n && (b?.lamports ?? 0n) === 0n;
  return a.lamports === b.lamports && a.owner === b.owner && a.executable === b.executable && Buffer.compare(a.data, b.data) === 0;
}

export function executeTransaction(opts: {
  tx: DecodedTransaction;
  read: AccountReader;
  programs: ReadonlyMap<string, Program>;
  now: number;
}): ExecutionResult {
  const { tx, read, programs, now } = opts;
  const keys = tx.accountKeys;

  for (const ix of tx.instructions) {
    if (!programs.has(keys[ix.programIdIndex] as string)) return { kind: 'rejected', err: 'ProgramAccountNotFound' };
  }

  // Fee payer validation (a transaction failing here is not landable).
  const fee = feeFor(tx);
  const payerKey = keys[0] as string;
  const payer = read(payerKey);
  if (!payer || payer.lamports === 0n) return { kind: 'rejected', err: 'AccountNotFound' };
  if (payer.owner !== SYSTEM_PROGRAM_ID || payer.data.length > 0) return { kind: 'rejected', err: 'InvalidAccountForFee' };
  if (payer.lamports < fee) return { kind: 'rejected', err: 'InsufficientFundsForFee' };
  const payerAfterFee: Account = { ...payer, lamports: payer.lamports - fee };
  if (!rentTransitionAllowed(payer, payerAfterFee)) return { kind: 'rejected', err: 'InsufficientFundsForFee' };

  const preBalances = keys.map((k) => read(k)?.lamports ?? 0n);
  const feeOnly = new Map<string, Account>([[payerKey, payerAfterFee]]);
  const working = new Map<string, Account>(feeOnly);
  const current = (k: string): Account | null => (working.has(k) ? (working.get(k) as Account) : read(k));
  const logs: string[] = [];
  const inner: InnerInstructions[] = [];
  let units = 0;
  let err: TransactionError | null = null;

  const runInstruction = (programId: string, metas: AccountMeta[], data: Uint8Array, depth: number, ixIndex: number): InstructionError | null => {
    const program = programs.get(programId);
    if (!program) return 'UnsupportedProgramId';
    logs.push(`Program ${programId} invoke [${depth}]`);
    const before = new Map(working);
    let consumed = program.builtin ? 150 : 0;
    const ctx: InstructionContext = {
      programId,
      accounts: metas,
      data,
      now,
      get: (k) => {
        const a = current(k);
        return a ? copy(a) : null;
      },
      set: (k, a) => {
        working.set(k, copy(a));
      },
      log: (msg) => logs.push(program.builtin ? msg : `Program log: ${msg}`),
      consume: (n) => {
        consumed += n;
      },
      invoke: (pid, accs, d) => {
        const pidIndex = keys.indexOf(pid);
        const idxs = accs.map((a) => keys.indexOf(a.key));
        if (pidIndex < 0 || idxs.some((i) => i < 0)) return 'MissingAccount';
        let group = inner.find((g) => g.index === ixIndex);
        if (!group) inner.push((group = { index: ixIndex, instructions: [] }));
        group.instructions.push({ programIdIndex: pidIndex, accounts: idxs, data: d, stackHeight: depth + 1 });
        return runInstruction(pid, accs, d, depth + 1, ixIndex);
      },
    };
    let result = program.execute(ctx);
    if (result === null) result = checkInvariants(before, metas);
    units += consumed;
    if (!program.builtin) logs.push(`Program ${programId} consumed ${consumed} of ${CU_LIMIT_PER_INSTRUCTION} compute units`);
    logs.push(result === null ? `Program ${programId} success` : `Program ${programId} failed: ${instructionErrorMessage(result)}`);
    return result;
  };

  // Runtime rules: read-only accounts keep lamports and data; lamports are conserved.
  const checkInvariants = (before: Map<string, Account>, metas: AccountMeta[]): InstructionError | null => {
    let sumBefore = 0n;
    let sumAfter = 0n;
    for (const [k, after] of working) {
      const prev = before.has(k) ? (before.get(k) as Account) : read(k);
      if (sameAccount(prev, after)) continue;
      const writable = metas.some((m) => m.key === k && m.isWritable);
      if (!writable) return (prev?.lamports ?? 0n) !== after.lamports ? 'ReadonlyLamportChange' : 'ReadonlyDataModified';
      sumBefore += prev?.lamports ?? 0n;
      sumAfter += after.lamports;
    }
    return sumBefore === sumAfter ? null : 'UnbalancedInstruction';
  };

  tx.instructions.forEach((ix, i) => {
    if (err !== null) return;
    const metas = ix.accounts.map((a) => ({ key: keys[a] as string, isSigner: isSigner(tx, a), isWritable: isWritable(tx, a) }));
    const e = runInstruction(keys[ix.programIdIndex] as string, metas, ix.data, 1, i);
    if (e !== null) err = { InstructionError: [i, e] };
  });

  if (err === null) {
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i] as string;
      if (!working.has(k)) continue;
      if (!rentTransitionAllowed(read(k), working.get(k) as Account)) {
        err = { InsufficientFundsForRent: { account_index: i } };
        break;
      }
    }
  }

  const writes = err === null ? working : feeOnly;
  const postBalances = keys.map((k) => (writes.has(k) ? (writes.get(k) as Account).lamports : (read(k)?.lamports ?? 0n)));
  return { kind: 'executed', err, fee, writes, preBalances, postBalances, logs, innerInstructions: err === null ? inner : [], unitsConsumed: units };
}
