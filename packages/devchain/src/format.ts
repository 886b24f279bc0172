/** JSON shapes of accounts and transactions, as agave's RPC renders them. */
import { SYSTEM_PROGRAM_ID } from './accounts.ts';
import type { Account } from './accounts.ts';
import { b58encode, toBase64 } from './encoding.ts';
import { invalidParams } from './errors.ts';
import type { TransactionRecord } from './ledger.ts';
import { isSigner, isWritable } from './transaction.ts';
import type { CompiledInstruction, DecodedTransaction } from './transaction.ts';

/** rentEpoch of rent-exempt accounts (u64::MAX). */
const RENT_EPOCH = 18446744073709551615;

export type AccountEncoding = 'base64' | 'base58' | 'jsonParsed';

export function parseAccountEncoding(v: unknown, fallback: AccountEncoding): AccountEncoding {
  if (v === undefined || v === null) return fallback;
  if (v === 'base64' || v === 'base58' || v === 'jsonParsed') return v;
  if (v === 'binary') return 'base58';
  throw invalidParams(`unsupported account encoding ${JSON.stringify(v)} (devchain supports base64, base58, jsonParsed)`);
}

export function accountJson(
  account: Account | null,
  encoding: AccountEncoding,
  dataSlice?: { offset: number; length: number },
): Record<string, unknown> | null {
  if (account === null || account.lamports === 0n) return null;
  let data = account.data;
  if (dataSlice) data = data.subarray(dataSlice.offset, dataSlice.offset + dataSlice.length);
  if (encoding === 'base58' && data.length > 128) throw invalidParams('Encoded binary (base 58) data should be less than 128 bytes, please use Base64 encoding.');
  return {
    data: encoding === 'base58' ? [b58encode(data), 'base58'] : [toBase64(data), 'base64'],
    executable: account.executable,
    lamports: Number(account.lamports),
    owner: account.owner,
    rentEpoch: RENT_EPOCH,
    space: account.data.length,
  };
}

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
        parsed: { info: { destination: key(1), lamports: Number(v.getBigUint64(4, true)), source: key(0) }, type: 'transfer' },
        program: 'system',
        programId,
        stackHeight,
      };
    }
    if (kind === 0 && ix.data.length >= 52 && ix.accounts.length >= 2) {
      return {
        parsed: {
          info: {
            lamports: Number(v.getBigUint64(4, true)),
            newAccount: key(1),
            owner: b58encode(ix.data.subarray(20, 52)),
            source: key(0),
            space: Number(v.getBigUint64(12, true)),
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
    fee: Number(r.fee),
    innerInstructions: inner,
    logMessages: r.logs,
    postBalances: r.postBalances.map(Number),
    postTokenBalances: [],
    preBalances: r.preBalances.map(Number),
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
  const out: Record<string, unknown> = { blockTime: r.blockTime, meta, slot: r.slot, transaction };
  if (includeVersion) out.version = tx.version;
  return out;
}
