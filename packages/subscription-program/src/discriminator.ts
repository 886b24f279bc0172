// @noble/hashes rather than node:crypto: the dashboard builds these instructions in the browser.
import { sha256 } from '@noble/hashes/sha2.js';

function sha256Prefix8(text: string): Uint8Array {
  return sha256(new TextEncoder().encode(text)).slice(0, 8);
}

/** Anchor account discriminator: first 8 bytes of sha256("account:Subscription"). */
export function accountDiscriminator(): Uint8Array {
  return sha256Prefix8('account:Subscription');
}

/** Anchor instruction discriminator: first 8 bytes of sha256("global:<name>"). */
export function instructionDiscriminator(name: string): Uint8Array {
  return sha256Prefix8(`global:${name}`);
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
