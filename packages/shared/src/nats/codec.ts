const enc = new TextEncoder();
const dec = new TextDecoder();

export const encode = (v: unknown): Uint8Array => enc.encode(JSON.stringify(v));
export const decode = (b: Uint8Array): unknown => (b.length === 0 ? undefined : JSON.parse(dec.decode(b)));

/** decode, with a body that is not JSON read as undefined: for a schema's safeParse to refuse, not a throw. */
export function safeDecode(b: Uint8Array): unknown {
  try {
    return decode(b);
  } catch {
    return undefined;
  }
}

/** The reply envelope of every request/reply subject. */
export type Reply = { ok: true; result: unknown } | { ok: false; error: import('../errors.ts').WireError };
