/**
 * Wire-format decoding, sanitizing and Ed25519 verification of transactions
 * (legacy and v0 messages).
 */
import { createPublicKey, verify } from 'node:crypto';
import { b58encode } from './encoding.ts';
import type { TransactionError } from './errors.ts';

export const PACKET_DATA_SIZE = 1232;

export interface CompiledInstruction {
  programIdIndex: number;
  accounts: number[];
  data: Uint8Array;
}

interface MessageHeader {
  numRequiredSignatures: number;
  numReadonlySignedAccounts: number;
  numReadonlyUnsignedAccounts: number;
}

interface AddressTableLookup {
  accountKey: string;
  writableIndexes: number[];
  readonlyIndexes: number[];
}

export interface DecodedTransaction {
  raw: Uint8Array;
  signatures: Uint8Array[];
  /** base58 signatures; the first one is the transaction id. */
  signatureIds: string[];
  version: 'legacy' | number;
  messageBytes: Uint8Array;
  header: MessageHeader;
  accountKeys: string[];
  accountKeyBytes: Uint8Array[];
  recentBlockhash: string;
  instructions: CompiledInstruction[];
  addressTableLookups: AddressTableLookup[];
}

class Reader {
  private pos = 0;
  private readonly bytes: Uint8Array;
  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }
  get offset(): number {
    return this.pos;
  }
  get remaining(): number {
    return this.bytes.length - this.pos;
  }
  u8(): number {
    const v = this.bytes[this.pos];
    if (v === undefined) throw new Error('io error: unexpected end of file');
    this.pos++;
    return v;
  }
  take(n: number): Uint8Array {
    if (this.pos + n > this.bytes.length) throw new Error('io error: unexpected end of file');
    const out = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  /** compact-u16 (shortvec) */
  shortU16(): number {
    let value = 0;
    for (let i = 0; i < 3; i++) {
      const b = this.u8();
      value |= (b & 0x7f) << (7 * i);
      if ((b & 0x80) === 0) {
        if (value > 0xffff) throw new Error('invalid compact-u16');
        return value;
      }
    }
    throw new Error('invalid compact-u16');
  }
}

export type DecodedMessage = Omit<DecodedTransaction, 'raw' | 'signatures' | 'signatureIds'>;

function readMessage(r: Reader, bytes: Uint8Array): DecodedMessage {
  const msgStart = r.offset;
  let version: 'legacy' | number = 'legacy';
  let first = r.u8();
  if (first & 0x80) {
    version = first & 0x7f;
    if (version !== 0) throw new Error(`unsupported transaction version ${version}`);
    first = r.u8();
  }
  const header: MessageHeader = { numRequiredSignatures: first, numReadonlySignedAccounts: r.u8(), numReadonlyUnsignedAccounts: r.u8() };
  const keyCount = r.shortU16();
  const accountKeyBytes: Uint8Array[] = [];
  for (let i = 0; i < keyCount; i++) accountKeyBytes.push(r.take(32));
  const recentBlockhash = b58encode(r.take(32));
  const ixCount = r.shortU16();
  const instructions: CompiledInstruction[] = [];
  for (let i = 0; i < ixCount; i++) {
    const programIdIndex = r.u8();
    const n = r.shortU16();
    const accounts = Array.from(r.take(n));
    const dataLen = r.shortU16();
    instructions.push({ programIdIndex, accounts, data: r.take(dataLen) });
  }
  const addressTableLookups: AddressTableLookup[] = [];
  if (version !== 'legacy') {
    const n = r.shortU16();
    for (let i = 0; i < n; i++) {
      const accountKey = b58encode(r.take(32));
      const writableIndexes = Array.from(r.take(r.shortU16()));
      const readonlyIndexes = Array.from(r.take(r.shortU16()));
      addressTableLookups.push({ accountKey, writableIndexes, readonlyIndexes });
    }
  }
  if (r.remaining !== 0) throw new Error('trailing bytes after message');
  return {
    version,
    messageBytes: bytes.subarray(msgStart),
    header,
    accountKeys: accountKeyBytes.map((k) => b58encode(k)),
    accountKeyBytes,
    recentBlockhash,
    instructions,
    addressTableLookups,
  };
}

/** Parses a serialized message (getFeeForMessage); throws Error on malformed input. */
export function decodeMessage(bytes: Uint8Array): DecodedMessage {
  return readMessage(new Reader(bytes), bytes);
}

/** Parses wire bytes; throws Error("...") describing a deserialization failure. */
export function decodeTransaction(raw: Uint8Array): DecodedTransaction {
  const r = new Reader(raw);
  const sigCount = r.shortU16();
  const signatures: Uint8Array[] = [];
  for (let i = 0; i < sigCount; i++) signatures.push(r.take(64));
  const message = readMessage(r, raw);
  return { raw, signatures, signatureIds: signatures.map((s) => b58encode(s)), ...message };
}

/** Structural checks agave performs before anything else ("invalid transaction: ..."). */
export function sanitize(tx: DecodedTransaction): TransactionError | null {
  const h = tx.header;
  const n = tx.accountKeys.length;
  if (tx.addressTableLookups.length > 0) return 'AddressLookupTableNotFound';
  if (h.numRequiredSignatures === 0 || tx.signatures.length !== h.numRequiredSignatures) return 'SanitizeFailure';
  if (h.numReadonlySignedAccounts >= h.numRequiredSignatures) return 'SanitizeFailure';
  if (h.numRequiredSignatures + h.numReadonlyUnsignedAccounts > n) return 'SanitizeFailure';
  for (const ix of tx.instructions) {
    // program id may not be the fee payer and must be a loaded key
    if (ix.programIdIndex === 0 || ix.programIdIndex >= n) return 'SanitizeFailure';
    if (ix.accounts.some((a) => a >= n)) return 'SanitizeFailure';
  }
  if (new Set(tx.accountKeys).size !== n) return 'AccountLoadedTwice';
  return null;
}

export function isSigner(tx: DecodedTransaction, i: number): boolean {
  return i < tx.header.numRequiredSignatures;
}

export function isWritable(tx: DecodedTransaction, i: number): boolean {
  const h = tx.header;
  if (i < h.numRequiredSignatures) return i < h.numRequiredSignatures - h.numReadonlySignedAccounts;
  return i < tx.accountKeys.length - h.numReadonlyUnsignedAccounts;
}

const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

function verifyEd25519(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  try {
    const key = createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, publicKey]), format: 'der', type: 'spki' });
    return verify(null, message, key, signature);
  } catch {
    return false;
  }
}

/** Every signature i must be a valid Ed25519 signature of the message by account key i. */
export function verifySignatures(tx: DecodedTransaction): boolean {
  return tx.signatures.every((sig, i) => {
    const key = tx.accountKeyBytes[i];
    return key !== undefined && verifyEd25519(key, tx.messageBytes, sig);
  });
}
