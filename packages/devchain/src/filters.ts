/** getProgramAccounts / programSubscribe filters (dataSize, memcmp, tokenAccountState), checked as agave checks them. */
import type { Account } from './accounts.ts';
import { b58decode } from './encoding.ts';
import { invalidParams } from './errors.ts';

const MAX_FILTERS = 4;
/** agave refuses memcmp patterns longer than this (decoded). */
const MAX_MEMCMP_BYTES = 128;
/** The longest base58 text 128 bytes can need: agave checks this before decoding anything. */
const MAX_MEMCMP_BASE58_CHARS = 175;

export type AccountFilter = { dataSize: number } | { memcmp: { offset: number; bytes: Uint8Array } } | { tokenAccountState: true };

function index(v: unknown, name: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw invalidParams(`${name} must be a non-negative integer`);
  return v;
}

function memcmpBytes(m: Record<string, unknown>): Uint8Array {
  const { bytes, encoding } = m;
  if (typeof bytes !== 'string') throw invalidParams('memcmp.bytes must be a string');
  let out: Uint8Array | null;
  if (encoding === undefined || encoding === null || encoding === 'base58') {
    if (bytes.length > MAX_MEMCMP_BASE58_CHARS) throw invalidParams(`Encoded binary (base 58) data should be less than ${MAX_MEMCMP_BYTES + 1} bytes`);
    out = b58decode(bytes);
  } else if (encoding === 'base64') {
    out = /^[A-Za-z0-9+/]*={0,2}$/.test(bytes) && bytes.length % 4 === 0 ? new Uint8Array(Buffer.from(bytes, 'base64')) : null;
  } else {
    throw invalidParams(`unknown variant \`${String(encoding)}\`, expected \`base58\` or \`base64\``);
  }
  if (out === null) throw invalidParams(`memcmp.bytes is not valid ${String(encoding ?? 'base58')}`);
  if (out.length > MAX_MEMCMP_BYTES) throw invalidParams(`Encoded binary data should be less than ${MAX_MEMCMP_BYTES + 1} bytes`);
  return out;
}

function parseFilter(f: unknown): AccountFilter {
  if (typeof f !== 'object' || f === null || Array.isArray(f)) throw invalidParams('each filter must be an object');
  const o = f as Record<string, unknown>;
  if ('dataSize' in o) return { dataSize: index(o.dataSize, 'dataSize') };
  if ('memcmp' in o) {
    const m = o.memcmp;
    if (typeof m !== 'object' || m === null) throw invalidParams('memcmp must be an object');
    const mc = m as Record<string, unknown>;
    return { memcmp: { offset: index(mc.offset, 'memcmp.offset'), bytes: memcmpBytes(mc) } };
  }
  if ('tokenAccountState' in o) return { tokenAccountState: true };
  throw invalidParams(`unknown filter ${JSON.stringify(Object.keys(o))}; expected dataSize, memcmp or tokenAccountState`);
}

export function parseFilters(v: unknown): AccountFilter[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalidParams('filters must be an array');
  if (v.length > MAX_FILTERS) throw invalidParams(`Too many filters provided; max ${MAX_FILTERS}`);
  return v.map(parseFilter);
}

function matches(account: Account, filter: AccountFilter): boolean {
  if ('dataSize' in filter) return account.data.length === filter.dataSize;
  if ('memcmp' in filter) {
    const { offset, bytes } = filter.memcmp;
    if (offset + bytes.length > account.data.length) return false;
    return Buffer.compare(account.data.subarray(offset, offset + bytes.length), bytes) === 0;
  }
  // devchain runs no SPL Token program, so no account is an initialized token account
  return false;
}

export const matchesAll = (account: Account, filters: AccountFilter[]): boolean => filters.every((f) => matches(account, f));
