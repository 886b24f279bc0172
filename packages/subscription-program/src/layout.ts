import { PublicKey } from '@solana/web3.js';
import { accountDiscriminator, bytesEqual } from './discriminator.ts';
import { SUBSCRIPTION_SEED } from './constants.ts';
import { isTierId } from './tiers.ts';
import type { TierId } from './tiers.ts';

/**
 * Account layout (little endian, Anchor style):
 *   [0..8)   discriminator = sha256("account:Subscription")[0..8]
 *   [8]      tier u8
 *   [9..17)  expires_at i64 (unix seconds)
 *   [17]     is_active u8 (bool, 0 or 1)
 *   [18..50) owner [32]
 *   [50]     bump u8
 */
export const SUBSCRIPTION_ACCOUNT_SIZE = 51;

export interface Subscription {
  tier: TierId;
  /** Unix seconds. */
  expiresAt: number;
  isActive: boolean;
  owner: PublicKey;
  bump: number;
}

/** [address, bump] of the subscription PDA of `owner` under `programId`. */
export function findSubscriptionAddress(programId: PublicKey, owner: PublicKey): [PublicKey, number] {
  return PublicKey.findProgramAddressSync([Buffer.from(SUBSCRIPTION_SEED, 'utf8'), owner.toBuffer()], programId);
}

export function encodeSubscription(s: Subscription): Uint8Array {
  if (!isTierId(s.tier)) throw new RangeError(`invalid tier ${String(s.tier)}`);
  if (!Number.isSafeInteger(s.expiresAt)) throw new RangeError(`invalid expiresAt ${String(s.expiresAt)}`);
  if (!Number.isInteger(s.bump) || s.bump < 0 || s.bump > 255) throw new RangeError(`invalid bump ${String(s.bump)}`);
  const out = new Uint8Array(SUBSCRIPTION_ACCOUNT_SIZE);
  const view = new DataView(out.buffer);
  out.set(accountDiscriminator(), 0);
  out[8] = s.tier;
  view.setBigInt64(9, BigInt(s.expiresAt), true);
  out[17] = s.isActive ? 1 : 0;
  out.set(s.owner.toBytes(), 18);
  out[50] = s.bump;
  return out;
}

/** Decodes account data; throws a descriptive Error for anything that is not a valid Subscription. */
export function decodeSubscription(data: Uint8Array): Subscription {
  if (data.length !== SUBSCRIPTION_ACCOUNT_SIZE) {
    throw new Error(`not a Subscription account: expected ${SUBSCRIPTION_ACCOUNT_SIZE} bytes, got ${data.length}`);
  }
  if (!bytesEqual(data.subarray(0, 8), accountDiscriminator())) {
    throw new Error('not a Subscription account: discriminator mismatch');
  }
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const tier = data[8];
  if (!isTierId(tier)) throw new Error(`invalid Subscription account: tier ${String(tier)} out of range`);
  const expires = view.getBigInt64(9, true);
  if (expires > BigInt(Number.MAX_SAFE_INTEGER) || expires < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new Error('invalid Subscription account: expires_at out of range');
  }
  const active = data[17];
  if (active !== 0 && active !== 1) throw new Error(`invalid Subscription account: is_active byte ${String(active)}`);
  return {
    tier,
    expiresAt: Number(expires),
    isActive: active === 1,
    owner: new PublicKey(data.subarray(18, 50)),
    bump: data[50] as number,
  };
}
