import bs58 from 'bs58';
import { AppError } from '@agenthost/shared';
import { programInstructions, type TxFacts } from './transactions.ts';

/** A base58 string that decodes to the 64 bytes of an Ed25519 transaction signature. */
export function checkSignatureFormat(sig: string): void {
  let bytes: Uint8Array | undefined;
  try {
    bytes = /^[1-9A-HJ-NP-Za-km-z]{64,90}$/.test(sig) ? bs58.decode(sig) : undefined;
  } catch {
    bytes = undefined;
  }
  if (bytes?.length !== 64) throw new AppError('TX_SIGNATURE_MALFORMED');
}

export function checkTier(tier: unknown): asserts tier is 0 | 1 | 2 {
  if (tier !== 0 && tier !== 1 && tier !== 2) throw new AppError('INVALID_TIER');
}

/**
 * The checks of design.md "Verification of register" on a landed transaction, in this order (the
 * first failing one decides the code): succeeded → invoked the program → has a subscribe → that
 * subscribe is the caller's and the caller signed → for the tier given. Returns the subscription
 * account the instruction wrote (its address is checked again when the account is read).
 */
export function verifySubscribeTx(tx: TxFacts, expect: { programId: string; wallet: string; tier: number }): { pda: string } {
  if (tx.err !== null) throw new AppError('TX_FAILED');
  const ixs = programInstructions(tx, expect.programId);
  if (ixs.length === 0) throw new AppError('TX_WRONG_PROGRAM');
  const subscribes = ixs.filter((i) => i.decoded?.name === 'subscribe');
  if (subscribes.length === 0) throw new AppError('TX_NOT_SUBSCRIBE');
  const mine = subscribes.filter((i) => i.ix.accounts[0] === expect.wallet);
  if (mine.length === 0 || !tx.signers.includes(expect.wallet)) throw new AppError('TX_WRONG_SIGNER');
  const match = mine.find((i) => i.decoded?.name === 'subscribe' && i.decoded.args.tier === expect.tier);
  if (!match) throw new AppError('TX_TIER_MISMATCH');
  const pda = match.ix.accounts[1];
  if (!pda) throw new AppError('SUBSCRIPTION_ACCOUNT_INVALID');
  return { pda };
}
