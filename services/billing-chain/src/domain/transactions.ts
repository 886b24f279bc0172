import type { VersionedTransactionResponse } from '@solana/web3.js';
import { decodeInstruction, type DecodedInstruction } from '@agenthost/subscription-program';

// What billing-chain reads out of a landed transaction: its signers and its instructions, decoded. Pure
// functions over web3.js's response, apart from the RPC client (chain.ts), so the verifier can be tested alone.

/** One top-level instruction of a transaction, with its account addresses resolved. */
export interface TxInstruction {
  programId: string;
  accounts: string[];
  data: Uint8Array;
}

/** What the service needs to know about a landed transaction. */
export interface TxFacts {
  signature: string;
  slot: number;
  /** meta.err: null when the transaction succeeded. */
  err: unknown;
  /** Addresses that signed the transaction. */
  signers: string[];
  instructions: TxInstruction[];
}

/** A landed transaction as the service reads it: account keys resolved (lookup tables too), signers, instructions. */
export function factsOf(signature: string, resp: VersionedTransactionResponse): TxFacts {
  const msg = resp.transaction.message;
  const loaded = resp.meta?.loadedAddresses;
  const keys = [
    ...msg.staticAccountKeys.map((k) => k.toBase58()),
    ...(loaded?.writable ?? []).map((k) => k.toBase58()),
    ...(loaded?.readonly ?? []).map((k) => k.toBase58()),
  ];
  const signers = msg.staticAccountKeys.slice(0, msg.header.numRequiredSignatures).map((k) => k.toBase58());
  const instructions = msg.compiledInstructions.map((ix) => ({
    programId: keys[ix.programIdIndex] ?? '',
    accounts: ix.accountKeyIndexes.map((i) => keys[i] ?? ''),
    data: ix.data,
  }));
  return { signature, slot: resp.slot, err: resp.meta?.err ?? null, signers, instructions };
}

/** The program's instructions in a transaction, decoded (unknown data → null). */
export function programInstructions(tx: TxFacts, programId: string): { ix: TxInstruction; decoded: DecodedInstruction | null }[] {
  return tx.instructions.filter((ix) => ix.programId === programId).map((ix) => ({ ix, decoded: decodeInstruction(ix.data) }));
}

/** The owner wallet an instruction acts on: account 0 for subscribe/deposit/cancel; renew names only the PDA. */
export function ownerOf(ix: TxInstruction, decoded: DecodedInstruction): string | undefined {
  return decoded.name === 'renew' ? undefined : ix.accounts[0];
}

/** The last subscribe or cancel of `wallet` in a transaction, if any. */
export function lastOwnerAction(tx: TxFacts, programId: string, wallet: string): 'subscribe' | 'cancel' | undefined {
  let last: 'subscribe' | 'cancel' | undefined;
  for (const { ix, decoded } of programInstructions(tx, programId)) {
    if (!decoded || ownerOf(ix, decoded) !== wallet) continue;
    if (decoded.name === 'subscribe' || decoded.name === 'cancel') last = decoded.name;
  }
  return last;
}

/** { InstructionError: [i, { Custom: n }] } → n. */
export function customCode(err: unknown): number | null {
  const ie = (err as { InstructionError?: [number, unknown] } | null)?.InstructionError;
  const custom = (ie?.[1] as { Custom?: number } | undefined)?.Custom;
  return typeof custom === 'number' ? custom : null;
}
