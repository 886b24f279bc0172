/** Transactions with their status meta, as agave's RPC renders them (getTransaction, getBlock). */
import { SYSTEM_PROGRAM_ID } from './accounts.ts';
import { b58encode, toBase64 } from './encoding.ts';
import { RpcCode, RpcError, invalidParams } from './errors.ts';
import type { TransactionRecord } from './ledger.ts';
import { isSigner, isWritable } from './transaction.ts';
import type { CompiledInstruction, DecodedTransaction } from './transaction.ts';

function instructionJson(ix: CompiledInstruction, stackHeight: number | null) {
  return { accounts: ix.accounts, data: b58encode(ix.data), programIdIndex: ix.programIdIndex, stackHeight };
}

function parsedInstructionJson(tx: DecodedTransaction, ix: CompiledInstruction, stackHeight: number | null) {
  const programId = tx.accountKeys[ix.programIdIndex] as string;
  const key = (i: number) => tx.accountKeys[ix.accounts[i] as number] as string;
  if (programId === SYSTEM_PROGRAM_ID && ix.data.length >= 4) {
    const v = new DataView(ix.data.buffer, ix.data.byteOffset, ix.data.byteLength);
    const kind = v.getUint32(0, true);
    if (kind === 2 && ix.data.length >= 12 && ix.accounts.length >= 2) {
      return {
        parsed: { info: { destination: key(1), lamports: v.getBigUint64(4, true), source: key(0) }, type: 'transfer' },
        program: 'system',
        programId,
        stackHeight,
      };
    }
    if (kind === 0 && ix.data.length >= 52 && ix.accounts.length >= 2) {
      return {
        parsed: {
          info: {
            lamports: v.getBigUint64(4, true),
            newAccount: key(1),
            owner: b58encode(ix.data.subarray(20, 52)),
            source: key(0),
            space: v.getBigUint64(12, true),
          },
          type: 'createAccount',
        },
        program: 'system',
        programId,
        stackHeight,
      };
    }
  }
  return { accounts: ix.accounts.map((a) => tx.accountKeys[a]), data: b58encode(ix.data), programId, stackHeight };
}

export type TxEncoding = 'json' | 'jsonParsed' | 'base64' | 'base58';
const TX_ENCODINGS: readonly TxEncoding[] = ['json', 'jsonParsed', 'base64', 'base58'];

export function parseTxEncoding(v: unknown): TxEncoding {
  if (v === undefined || v === null) return 'json';
  if (typeof v === 'string' && (TX_ENCODINGS as readonly string[]).includes(v)) return v as TxEncoding;
  throw invalidParams(`unknown variant \`${String(v)}\`, expected one of ${TX_ENCODINGS.map((e) => `\`${e}\``).join(', ')}`);
}

/** maxSupportedTransactionVersion: absent (legacy clients) or a u8. */
export function parseMaxVersion(v: unknown): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 255) throw invalidParams('maxSupportedTransactionVersion must be an integer from 0 to 255');
  return v;
}

/** agave's rule: without maxSupportedTransactionVersion only legacy transactions can be returned. */
export function checkVersion(r: TransactionRecord, maxVersion: number | null): void {
  const v = r.tx.version;
  if (v === 'legacy' || (maxVersion !== null && v <= maxVersion)) return;
  throw new RpcError(
    RpcCode.TransactionVersionNotSupported,
    `Transaction version (${v}) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": ${v}`,
  );
}

/** The accounts-only view of transactionDetails: "accounts" in getBlock. */
export function transactionAccountsJson(r: TransactionRecord, includeVersion: boolean): Record<string, unknown> {
  const tx = r.tx;
  const out: Record<string, unknown> = {
    meta: {
      err: r.err,
      fee: r.fee,
      postBalances: r.postBalances,
      postTokenBalances: [],
      preBalances: r.preBalances,
      preTokenBalances: [],
      status: r.err === null ? { Ok: null } : { Err: r.err },
    },
    transaction: {
      accountKeys: tx.accountKeys.map((pubkey, i) => ({ pubkey, signer: isSigner(tx, i), source: 'transaction', writable: isWritable(tx, i) })),
      signatures: tx.signatureIds,
    },
  };
  if (includeVersion) out.version = tx.version;
  return out;
}

/** { meta, transaction, version? } — a transaction inside a block; getTransaction adds slot and blockTime. */
export function transactionJson(r: TransactionRecord, encoding: TxEncoding, includeVersion: boolean): Record<string, unknown> {
  const tx = r.tx;
  const parsed = encoding === 'jsonParsed';
  const inner = r.innerInstructions.map((g) => ({
    index: g.index,
    instructions: g.instructions.map((ix) => (parsed ? parsedInstructionJson(tx, ix, ix.stackHeight) : instructionJson(ix, ix.stackHeight))),
  }));
  const meta: Record<string, unknown> = {
    computeUnitsConsumed: r.unitsConsumed,
    err: r.err,
    fee: r.fee,
    innerInstructions: inner,
    logMessages: r.logs,
    postBalances: r.postBalances,
    postTokenBalances: [],
    preBalances: r.preBalances,
    preTokenBalances: [],
    rewards: [],
    status: r.err === null ? { Ok: null } : { Err: r.err },
  };
  if (!parsed) meta.loadedAddresses = { readonly: [], writable: [] };
  let transaction: unknown;
  if (encoding === 'base64') transaction = [toBase64(tx.raw), 'base64'];
  else if (encoding === 'base58') transaction = [b58encode(tx.raw), 'base58'];
  else {
    const message: Record<string, unknown> = parsed
      ? {
          accountKeys: tx.accountKeys.map((pubkey, i) => ({ pubkey, signer: isSigner(tx, i), source: 'transaction', writable: isWritable(tx, i) })),
          instructions: tx.instructions.map((ix) => parsedInstructionJson(tx, ix, null)),
          recentBlockhash: tx.recentBlockhash,
        }
      : {
          accountKeys: tx.accountKeys,
          header: tx.header,
          instructions: tx.instructions.map((ix) => instructionJson(ix, null)),
          recentBlockhash: tx.recentBlockhash,
        };
    if (tx.version !== 'legacy') message.addressTableLookups = [];
    transaction = { message, signatures: tx.signatureIds };
  }
  const out: Record<string, unknown> = { meta, transaction };
  if (includeVersion) out.version = tx.version;
  return out;
}
