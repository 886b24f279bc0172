/**
 * JSON text with exact 64-bit integers. Solana's RPC is serde JSON: u64 fields such as
 * lamports and rentEpoch (u64::MAX) are plain JSON numbers that a double cannot hold, so
 * values kept as bigint are written as raw digits, and request numbers beyond 2^53 are read
 * from their source text instead of being rounded.
 */

// JSON.rawJSON and the reviver's source text are in V8 (Node 22+) but not yet in TypeScript's lib.
const rawJson = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;
type Reviver = (this: unknown, key: string, value: unknown, context?: { source?: string }) => unknown;

export function stringifyJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? rawJson(v.toString()) : v));
}

const exactIntegers: Reviver = (_key, value, context) => {
  if (typeof value !== 'number' || Number.isSafeInteger(value) || context?.source === undefined) return value;
  return /^-?\d+$/.test(context.source) ? BigInt(context.source) : value;
};

/** JSON.parse, except that integers outside the safe range become bigint. Throws SyntaxError. */
export function parseJson(text: string): unknown {
  return JSON.parse(text, exactIntegers as Parameters<typeof JSON.parse>[1]);
}
