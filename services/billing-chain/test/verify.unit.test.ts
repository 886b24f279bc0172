import { randomBytes } from 'node:crypto';
import bs58 from 'bs58';
import { Keypair, type PublicKey, SystemProgram } from '@solana/web3.js';
import { depositInstruction, subscribeInstruction } from '@agenthost/subscription-program';
import { describe, expect, it } from 'vitest';
import { AppError } from '@agenthost/shared';
import type { TxFacts } from '../src/domain/transactions.ts';
import { checkSignatureFormat, checkTier, verifySubscribeTx } from '../src/domain/verify.ts';

// The order and codes of the register checks, on transactions built in memory.

const programId = Keypair.generate().publicKey;
const treasury = Keypair.generate().publicKey;
const owner = Keypair.generate().publicKey;
const other = Keypair.generate().publicKey;

function facts(ixs: ReturnType<typeof subscribeInstruction>[], signers: PublicKey[], err: unknown = null): TxFacts {
  return {
    signature: bs58.encode(randomBytes(64)),
    slot: 1,
    err,
    signers: signers.map((s) => s.toBase58()),
    instructions: ixs.map((ix) => ({ programId: ix.programId.toBase58(), accounts: ix.keys.map((k) => k.pubkey.toBase58()), data: new Uint8Array(ix.data) })),
  };
}

const code = (fn: () => unknown): string => {
  try {
    fn();
    return 'ok';
  } catch (err) {
    return err instanceof AppError ? err.code : String(err);
  }
};
const expectFor = { programId: programId.toBase58(), wallet: owner.toBase58(), tier: 1 };
const sub = (o: PublicKey, tier: number) => subscribeInstruction({ programId, owner: o, treasury, tier });

describe('register verification', () => {
  it('accepts the caller’s own subscribe for the tier given and names its account', () => {
    const out = verifySubscribeTx(facts([sub(owner, 1)], [owner]), expectFor);
    expect(out.pda).toBe(sub(owner, 1).keys[1]!.pubkey.toBase58());
  });

  it('checks in order: failed, program, instruction, signer, tier', () => {
    expect(code(() => verifySubscribeTx(facts([sub(other, 2)], [other], { InstructionError: [0, { Custom: 6006 }] }), expectFor))).toBe('TX_FAILED');
    const transfer = SystemProgram.transfer({ fromPubkey: owner, toPubkey: treasury, lamports: 1 });
    expect(code(() => verifySubscribeTx(facts([transfer as never], [owner]), expectFor))).toBe('TX_WRONG_PROGRAM');
    expect(code(() => verifySubscribeTx(facts([depositInstruction({ programId, owner, treasury, lamports: 5n })], [owner]), expectFor))).toBe(
      'TX_NOT_SUBSCRIBE',
    );
    expect(code(() => verifySubscribeTx(facts([sub(other, 1)], [other, owner]), expectFor))).toBe('TX_WRONG_SIGNER');
    expect(code(() => verifySubscribeTx(facts([sub(owner, 1)], [other]), expectFor))).toBe('TX_WRONG_SIGNER');
    expect(code(() => verifySubscribeTx(facts([sub(owner, 2)], [owner]), expectFor))).toBe('TX_TIER_MISMATCH');
  });

  it('finds the matching subscribe among several instructions', () => {
    expect(code(() => verifySubscribeTx(facts([sub(other, 1), sub(owner, 2), sub(owner, 1)], [other, owner]), expectFor))).toBe('ok');
  });

  it('accepts only base58 64-byte signatures and tiers 0..2', () => {
    expect(code(() => checkSignatureFormat(bs58.encode(randomBytes(64))))).toBe('ok');
    for (const bad of ['', 'abc', bs58.encode(randomBytes(63)), bs58.encode(randomBytes(65)), `${bs58.encode(randomBytes(64)).slice(0, -1)}0`]) {
      expect(code(() => checkSignatureFormat(bad))).toBe('TX_SIGNATURE_MALFORMED');
    }
    for (const t of [0, 1, 2]) expect(code(() => checkTier(t))).toBe('ok');
    for (const t of [3, -1, 0.5, '1', null]) expect(code(() => checkTier(t))).toBe('INVALID_TIER');
  });
});
