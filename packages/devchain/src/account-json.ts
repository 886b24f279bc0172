/** Accounts as agave's RPC renders them (UiAccount), in each of its data encodings. */
import { zstdCompressSync } from 'node:zlib';
import { BPF_UPGRADEABLE_LOADER_ID, SYSTEM_PROGRAM_ID } from './accounts.ts';
import type { Account } from './accounts.ts';
import { b58encode, toBase64 } from './encoding.ts';
import { invalidParams } from './errors.ts';

/** rentEpoch of rent-exempt accounts: u64::MAX, kept as bigint so it is written exactly. */
const RENT_EPOCH = 18446744073709551615n;

/** Above this many bytes agave refuses base58 (it is slow and large). */
const MAX_BASE58_BYTES = 128;

/** `binary` is the legacy encoding: data is a bare base58 string instead of [data, encoding]. */
export type AccountEncoding = 'binary' | 'base58' | 'base64' | 'base64+zstd' | 'jsonParsed';
const ENCODINGS: readonly AccountEncoding[] = ['binary', 'base58', 'base64', 'jsonParsed', 'base64+zstd'];

export interface DataSlice {
  offset: number;
  length: number;
}

export function parseAccountEncoding(v: unknown, fallback: AccountEncoding): AccountEncoding {
  if (v === undefined || v === null) return fallback;
  if (typeof v === 'string' && (ENCODINGS as readonly string[]).includes(v)) return v as AccountEncoding;
  // serde's wording for an unknown enum variant, as agave answers it
  throw invalidParams(`unknown variant \`${String(v)}\`, expected one of ${ENCODINGS.map((e) => `\`${e}\``).join(', ')}`);
}

/** The request-level checks agave makes before reading any account. */
export function checkSliceAndEncoding(encoding: AccountEncoding, slice: DataSlice | undefined): void {
  if (encoding === 'jsonParsed' && slice !== undefined) {
    throw invalidParams('Sliced account data can only be encoded using binary (base 58) or base64 encoding.');
  }
}

/**
 * jsonParsed data of the accounts devchain holds that a real node parses: only the
 * upgradeable loader's Program account (tag 2 + programdata address). Everything else —
 * wallets, the subscription program's accounts, native programs — has no parser on a real
 * node either, and falls back to base64 there too.
 */
function parsedData(account: Account): Record<string, unknown> | null {
  const data = account.data;
  if (account.owner === BPF_UPGRADEABLE_LOADER_ID && data.length === 36 && data[0] === 2 && data[1] === 0 && data[2] === 0 && data[3] === 0) {
    return { parsed: { info: { programData: b58encode(data.subarray(4)) }, type: 'program' }, program: 'bpf-upgradeable-loader', space: 36n };
  }
  return null;
}

function encodeData(account: Account, encoding: AccountEncoding, slice: DataSlice | undefined): unknown {
  const data = slice ? account.data.subarray(slice.offset, slice.offset + slice.length) : account.data;
  switch (encoding) {
    case 'binary':
    case 'base58':
      if (data.length > MAX_BASE58_BYTES) {
        throw invalidParams(`Encoded binary (base 58) data should be less than ${MAX_BASE58_BYTES} bytes, please use Base64 encoding.`);
      }
      return encoding === 'binary' ? b58encode(data) : [b58encode(data), 'base58'];
    case 'base64+zstd':
      // the pledged size lets zstd size its window to the data: ~1.5-4x faster per account
      return [toBase64(zstdCompressSync(data, { pledgedSrcSize: data.length })), 'base64+zstd'];
    case 'jsonParsed':
      return parsedData(account) ?? [toBase64(data), 'base64'];
    default:
      return [toBase64(data), 'base64'];
  }
}

export function accountJson(account: Account | null, encoding: AccountEncoding, slice?: DataSlice): Record<string, unknown> | null {
  if (account === null || account.lamports === 0n) return null;
  return {
    data: encodeData(account, encoding, slice),
    executable: account.executable,
    lamports: account.lamports,
    owner: account.owner,
    rentEpoch: RENT_EPOCH,
    space: BigInt(account.data.length),
  };
}

/** What agave notifies for an account that was closed: the default account (empty, system-owned, rentEpoch 0). */
export function closedAccountJson(encoding: AccountEncoding): Record<string, unknown> {
  const empty: Account = { lamports: 0n, data: new Uint8Array(), owner: SYSTEM_PROGRAM_ID, executable: false };
  return { data: encodeData(empty, encoding, undefined), executable: false, lamports: 0n, owner: SYSTEM_PROGRAM_ID, rentEpoch: 0n, space: 0n };
}
