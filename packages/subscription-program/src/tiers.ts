/** Subscription tiers. The numeric id is the on-chain `tier u8`. */
export const TIERS = ['free', 'pro', 'enterprise'] as const;

export type TierName = (typeof TIERS)[number];
export type TierId = 0 | 1 | 2;

export function isTierId(n: unknown): n is TierId {
  return n === 0 || n === 1 || n === 2;
}

export function isTierName(s: unknown): s is TierName {
  return typeof s === 'string' && (TIERS as readonly string[]).includes(s);
}

/** 0 → 'free', 1 → 'pro', 2 → 'enterprise'; throws RangeError otherwise. */
export function tierName(n: number): TierName {
  if (!isTierId(n)) throw new RangeError(`unknown tier id ${String(n)} (expected 0, 1 or 2)`);
  return TIERS[n];
}

/** 'free' → 0, 'pro' → 1, 'enterprise' → 2; throws RangeError otherwise. */
export function tierId(name: string): TierId {
  const i = (TIERS as readonly string[]).indexOf(name);
  if (i < 0) throw new RangeError(`unknown tier name ${JSON.stringify(name)} (expected free, pro or enterprise)`);
  return i as TierId;
}
