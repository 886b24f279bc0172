/** Parameter parsing shared by the JSON-RPC methods; every failure is agave's -32602. */
import type { Commitment, SlotClock } from '../clock.ts';
import { b58decode, parseSignature } from '../encoding.ts';
import { RpcCode, RpcError, invalidParams } from '../errors.ts';
import { stringifyJson } from '../json.ts';
import type { DataSlice } from '../account-json.ts';
import type { Params } from '../rpc.ts';

export const SOLANA_CORE_VERSION = '2.1.0';
/** getVersion's and getClusterNodes' `featureSet`: the first 4 bytes of that release's feature set id. */
export const FEATURE_SET = 1725507508;

/** { apiVersion, slot }: the context of every RpcResponse. */
export const rpcContext = (slot: number) => ({ apiVersion: SOLANA_CORE_VERSION, slot });

export type Config = Record<string, unknown>;

export function list(params: Params): unknown[] {
  if (!Array.isArray(params)) throw invalidParams('expected an array of parameters');
  return params;
}

export function cfgAt(params: unknown[], i: number): Config {
  const v = params[i];
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalidParams(`parameter ${i} must be a configuration object`);
  return v as Config;
}

const COMMITMENTS: Record<string, Commitment> = {
  processed: 'processed',
  recent: 'processed',
  confirmed: 'confirmed',
  single: 'confirmed',
  singleGossip: 'confirmed',
  finalized: 'finalized',
  root: 'finalized',
  max: 'finalized',
};

export function commitmentOf(cfg: Config, fallback: Commitment = 'finalized'): Commitment {
  const v = cfg.commitment;
  if (v === undefined || v === null) return fallback;
  const c = typeof v === 'string' ? COMMITMENTS[v] : undefined;
  if (!c) throw invalidParams(`unknown commitment ${stringifyJson(v)}`);
  return c;
}

/** Ledger reads (transactions, blocks) exist only from `confirmed` up, as on Solana. */
export function atLeastConfirmed(cfg: Config): Commitment {
  const c = commitmentOf(cfg);
  if (c === 'processed') throw invalidParams('Method does not support commitment below `confirmed`');
  return c;
}

export function bool(v: unknown, name: string, fallback: boolean): boolean {
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'boolean') throw invalidParams(`${name} must be a boolean`);
  return v;
}

export function uint(v: unknown, name: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw invalidParams(`${name} must be a non-negative integer`);
  return v;
}

const U64_MAX = 18446744073709551615n;

/** A u64 parameter, exact even beyond 2^53 (the request parser keeps those as bigint). */
export function u64(v: unknown, name: string): bigint {
  if (typeof v === 'bigint' && v >= 0n && v <= U64_MAX) return v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  throw invalidParams(`${name} must be an integer from 0 to ${U64_MAX}`);
}

export function optionalSignature(v: unknown): string | undefined {
  return v === undefined || v === null ? undefined : parseSignature(v);
}

export function dataSliceOf(cfg: Config): DataSlice | undefined {
  const ds = cfg.dataSlice as { offset?: unknown; length?: unknown } | undefined | null;
  return ds === undefined || ds === null ? undefined : { offset: uint(ds.offset, 'dataSlice.offset'), length: uint(ds.length, 'dataSlice.length') };
}

/** The slot a read at cfg.commitment sees; enforces minContextSlot (-32016) like agave. */
export function slotFor(clock: SlotClock, cfg: Config, fallback: Commitment = 'finalized'): number {
  const slot = clock.commitmentSlot(commitmentOf(cfg, fallback));
  if (cfg.minContextSlot !== undefined && cfg.minContextSlot !== null && uint(cfg.minContextSlot, 'minContextSlot') > slot) {
    throw new RpcError(RpcCode.MinContextSlotNotReached, 'Minimum context slot has not been reached', { contextSlot: slot });
  }
  return slot;
}

export function decodeWire(v: unknown, encoding: unknown): Uint8Array {
  if (typeof v !== 'string') throw invalidParams('transaction must be an encoded string');
  const enc = encoding ?? 'base58';
  if (enc === 'base64') {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(v) || v.length % 4 !== 0) throw invalidParams('invalid base64 encoding');
    return new Uint8Array(Buffer.from(v, 'base64'));
  }
  if (enc === 'base58') {
    const bytes = b58decode(v);
    if (bytes === null) throw invalidParams('invalid base58 encoding');
    return bytes;
  }
  throw invalidParams(`unsupported encoding ${stringifyJson(enc)} (base58 or base64)`);
}

/** serde_json's words for an unexpected JSON value, as in agave's "invalid type: …, expected …" messages. */
export function unexpected(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return `string ${JSON.stringify(v)}`;
  if (typeof v === 'boolean') return `boolean \`${v}\``;
  if (typeof v === 'bigint') return `integer \`${v}\``;
  if (typeof v === 'number') return Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``;
  return Array.isArray(v) ? 'sequence' : 'map';
}

/** jsonrpc-core's answer to a param serde refuses: -32602 "Invalid params: <serde error>." */
export const serdeError = (detail: string): RpcError => invalidParams(`${detail}.`);

/**
 * A u64 param (a slot, an epoch, a limit) read as serde reads it; `arity` names the tuple a
 * missing required param is counted against. Values past 2^53 become the nearest double, far
 * beyond any slot devchain reaches.
 */
export function u64Param(v: unknown, position: number, arity: number): number {
  if (v === undefined) throw serdeError(`invalid length ${position}, expected a tuple of size ${arity}`);
  if ((typeof v === 'number' && Number.isInteger(v)) || typeof v === 'bigint') {
    if (v < 0 || BigInt(v) > U64_MAX) throw serdeError(`invalid value: integer \`${v}\`, expected u64`);
    return Number(v);
  }
  throw serdeError(`invalid type: ${unexpected(v)}, expected u64`);
}

/** An optional config object (`struct RpcEpochConfig` and the like); null and absent are the defaults. */
export function structParam(v: unknown, name: string): Config {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw serdeError(`invalid type: ${unexpected(v)}, expected struct ${name}`);
  return v as Config;
}

/** An error agave words itself (Error::invalid_params(message)): -32602 with the message as it is. */
export const paramError = (message: string): RpcError => new RpcError(RpcCode.InvalidParams, message);

/** A method that takes no params accepts none or [] (jsonrpc-core's expect_no_params). */
export function noParams(p: Params): void {
  if (Array.isArray(p) ? p.length > 0 : Object.keys(p).length > 0) {
    throw new RpcError(RpcCode.InvalidParams, 'Invalid parameters: No parameters were expected');
  }
}

/** agave's verify_pubkey: a string that is not base58 is "Invalid", one of the wrong length "WrongSize". */
export function verifyPubkey(v: unknown): string {
  if (typeof v !== 'string') throw serdeError(`invalid type: ${unexpected(v)}, expected a string`);
  const bytes = v.length > 44 ? null : b58decode(v);
  if (bytes === null && v.length <= 44) throw new RpcError(RpcCode.InvalidParams, 'Invalid param: Invalid');
  if (bytes === null || bytes.length !== 32) throw new RpcError(RpcCode.InvalidParams, 'Invalid param: WrongSize');
  return v;
}
