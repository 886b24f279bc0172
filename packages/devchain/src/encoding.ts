import bs58 from 'bs58';
import { invalidParams } from './errors.ts';

export const b58encode = (bytes: Uint8Array): string => bs58.encode(bytes);

export function b58decode(s: string): Uint8Array | null {
  try {
    return bs58.decode(s);
  } catch {
    return null;
  }
}

/** Parses a base58 public key param; throws the -32602 "Invalid param" Solana returns. */
export function parsePubkey(v: unknown, what = 'pubkey'): string {
  if (typeof v !== 'string') throw invalidParams(`${what} must be a base58 string`);
  const bytes = b58decode(v);
  if (bytes === null || bytes.length !== 32) throw invalidParams(`Invalid ${what}: ${v.slice(0, 64)}`);
  return b58encode(bytes);
}

export function parseSignature(v: unknown): string {
  if (typeof v !== 'string') throw invalidParams('signature must be a base58 string');
  const bytes = b58decode(v);
  if (bytes === null || bytes.length !== 64) throw invalidParams(`Invalid signature: ${v.slice(0, 100)}`);
  return v;
}

export const toBase64 = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
