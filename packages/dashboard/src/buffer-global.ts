// @solana/web3.js and the subscription program's instruction builders use Node's Buffer: give the page one
// before they load (this module is imported first).
import { Buffer } from 'buffer';

(globalThis as { Buffer?: unknown }).Buffer ??= Buffer;
