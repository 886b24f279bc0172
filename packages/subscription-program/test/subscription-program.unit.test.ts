import { createHash } from 'node:crypto';
import { Keypair, PublicKey, SystemProgram } from '@solana/web3.js';
import { describe, expect, it } from 'vitest';
import {
  SUBSCRIPTION_ACCOUNT_SIZE,
  TIERS,
  accountDiscriminator,
  cancelInstruction,
  decodeInstruction,
  decodeSubscription,
  depositInstruction,
  encodeSubscription,
  findSubscriptionAddress,
  instructionDiscriminator,
  programErrorName,
  renewInstruction,
  subscribeInstruction,
  tierId,
  tierName,
} from '../src/index.ts';

const programId = Keypair.fromSeed(new Uint8Array(32).fill(7)).publicKey;
const owner = Keypair.fromSeed(new Uint8Array(32).fill(8)).publicKey;
const treasury = Keypair.fromSeed(new Uint8Array(32).fill(9)).publicKey;

const sha8 = (s: string) => new Uint8Array(createHash('sha256').update(s).digest().subarray(0, 8));

describe('tiers', () => {
  it('maps tier ids and names both ways', () => {
    expect(TIERS).toEqual(['free', 'pro', 'enterprise']);
    expect([0, 1, 2].map(tierName)).toEqual(['free', 'pro', 'enterprise']);
    expect(TIERS.map(tierId)).toEqual([0, 1, 2]);
  });
  it('rejects unknown tiers', () => {
    expect(() => tierName(3)).toThrow(RangeError);
    expect(() => tierName(-1)).toThrow(RangeError);
    expect(() => tierId('gold')).toThrow(RangeError);
  });
});

describe('discriminators', () => {
  it('follow the Anchor sha256 convention', () => {
    expect(accountDiscriminator()).toEqual(sha8('account:Subscription'));
    expect(instructionDiscriminator('subscribe')).toEqual(sha8('global:subscribe'));
    expect(instructionDiscriminator('renew')).toHaveLength(8);
  });
});

describe('findSubscriptionAddress', () => {
  it('is deterministic and matches the ["subscription", owner] seeds', () => {
    const [a, bumpA] = findSubscriptionAddress(programId, owner);
    const [b, bumpB] = findSubscriptionAddress(programId, owner);
    expect(a.equals(b)).toBe(true);
    expect(bumpA).toBe(bumpB);
    const expected = PublicKey.createProgramAddressSync([Buffer.from('subscription'), owner.toBuffer(), Buffer.of(bumpA)], programId);
    expect(a.equals(expected)).toBe(true);
    expect(PublicKey.isOnCurve(a.toBytes())).toBe(false);
  });
  it('differs per owner and per program', () => {
    const [a] = findSubscriptionAddress(programId, owner);
    expect(a.equals(findSubscriptionAddress(programId, treasury)[0])).toBe(false);
    expect(a.equals(findSubscriptionAddress(treasury, owner)[0])).toBe(false);
  });
});

describe('subscription account layout', () => {
  const sub = { tier: 2 as const, expiresAt: 1_760_000_000, isActive: true, owner, bump: 254 };

  it('round-trips through encode/decode', () => {
    const data = encodeSubscription(sub);
    expect(data).toHaveLength(SUBSCRIPTION_ACCOUNT_SIZE);
    expect(SUBSCRIPTION_ACCOUNT_SIZE).toBe(51);
    const back = decodeSubscription(data);
    expect(back.tier).toBe(2);
    expect(back.expiresAt).toBe(1_760_000_000);
    expect(back.isActive).toBe(true);
    expect(back.owner.equals(owner)).toBe(true);
    expect(back.bump).toBe(254);
  });

  it('places fields at the documented offsets', () => {
    const data = encodeSubscription({ ...sub, isActive: false, expiresAt: -5 });
    expect(data.subarray(0, 8)).toEqual(accountDiscriminator());
    expect(data[8]).toBe(2);
    expect(Buffer.from(data).readBigInt64LE(9)).toBe(-5n);
    expect(data[17]).toBe(0);
    expect(Buffer.from(data.subarray(18, 50)).equals(owner.toBuffer())).toBe(true);
    expect(data[50]).toBe(254);
  });

  it('rejects a wrong size', () => {
    expect(() => decodeSubscription(new Uint8Array(50))).toThrow(/expected 51 bytes, got 50/);
    expect(() => decodeSubscription(new Uint8Array(0))).toThrow(/expected 51 bytes/);
  });

  it('rejects a wrong discriminator', () => {
    const data = encodeSubscription(sub);
    data[0] = (data[0] ?? 0) ^ 0xff;
    expect(() => decodeSubscription(data)).toThrow(/discriminator/);
  });

  it('rejects garbage field values', () => {
    const badTier = encodeSubscription(sub);
    badTier[8] = 9;
    expect(() => decodeSubscription(badTier)).toThrow(/tier/);
    const badBool = encodeSubscription(sub);
    badBool[17] = 2;
    expect(() => decodeSubscription(badBool)).toThrow(/is_active/);
  });

  it('decodes data that lives inside a larger buffer', () => {
    const big = new Uint8Array(100);
    big.set(encodeSubscription(sub), 10);
    expect(decodeSubscription(big.subarray(10, 61)).expiresAt).toBe(sub.expiresAt);
  });
});

describe('instruction builders', () => {
  const [pda] = findSubscriptionAddress(programId, owner);

  it('subscribe carries discriminator + tier and the four accounts in order', () => {
    const ix = subscribeInstruction({ programId, owner, treasury, tier: 1 });
    expect(ix.programId.equals(programId)).toBe(true);
    expect(new Uint8Array(ix.data)).toEqual(new Uint8Array([...instructionDiscriminator('subscribe'), 1]));
    expect(ix.keys.map((k) => [k.pubkey.toBase58(), k.isSigner, k.isWritable])).toEqual([
      [owner.toBase58(), true, true],
      [pda.toBase58(), false, true],
      [treasury.toBase58(), false, true],
      [SystemProgram.programId.toBase58(), false, false],
    ]);
    expect(() => subscribeInstruction({ programId, owner, treasury, tier: 3 })).toThrow(RangeError);
  });

  it('deposit encodes lamports as u64 little endian', () => {
    const ix = depositInstruction({ programId, owner, treasury, lamports: 0x0102030405060708n });
    expect(ix.data.subarray(0, 8)).toEqual(Buffer.from(instructionDiscriminator('deposit')));
    expect(ix.data.readBigUInt64LE(8)).toBe(0x0102030405060708n);
    expect(ix.keys).toHaveLength(4);
    expect(() => depositInstruction({ programId, owner, treasury, lamports: -1n })).toThrow(RangeError);
    expect(() => depositInstruction({ programId, owner, treasury, lamports: 1n << 64n })).toThrow(RangeError);
  });

  it('cancel has no args; renew takes caller, PDA and treasury', () => {
    const cancel = cancelInstruction({ programId, owner, treasury });
    expect(new Uint8Array(cancel.data)).toEqual(instructionDiscriminator('cancel'));
    const caller = Keypair.generate().publicKey;
    const renew = renewInstruction({ programId, caller, owner, treasury });
    expect(new Uint8Array(renew.data)).toEqual(instructionDiscriminator('renew'));
    expect(renew.keys.map((k) => [k.pubkey.toBase58(), k.isSigner, k.isWritable])).toEqual([
      [caller.toBase58(), true, true],
      [pda.toBase58(), false, true],
      [treasury.toBase58(), false, true],
    ]);
  });
});

describe('decodeInstruction', () => {
  it('decodes every instruction the builders produce', () => {
    expect(decodeInstruction(subscribeInstruction({ programId, owner, treasury, tier: 2 }).data)).toEqual({
      name: 'subscribe',
      args: { tier: 2 },
    });
    expect(decodeInstruction(depositInstruction({ programId, owner, treasury, lamports: 42n }).data)).toEqual({
      name: 'deposit',
      args: { lamports: 42n },
    });
    expect(decodeInstruction(cancelInstruction({ programId, owner, treasury }).data)).toEqual({ name: 'cancel', args: {} });
    expect(decodeInstruction(renewInstruction({ programId, caller: owner, owner, treasury }).data)).toEqual({
      name: 'renew',
      args: {},
    });
  });

  it('returns null for garbage, unknown discriminators and wrong lengths', () => {
    expect(decodeInstruction(new Uint8Array())).toBeNull();
    expect(decodeInstruction(new Uint8Array(7))).toBeNull();
    expect(decodeInstruction(new Uint8Array(9))).toBeNull();
    expect(decodeInstruction(Uint8Array.from([...instructionDiscriminator('transfer'), 1]))).toBeNull();
    expect(decodeInstruction(instructionDiscriminator('subscribe'))).toBeNull();
    expect(decodeInstruction(Uint8Array.from([...instructionDiscriminator('subscribe'), 1, 2]))).toBeNull();
    expect(decodeInstruction(Uint8Array.from([...instructionDiscriminator('deposit'), 1, 2, 3]))).toBeNull();
    expect(decodeInstruction(Uint8Array.from([...instructionDiscriminator('cancel'), 0]))).toBeNull();
  });
});

describe('program errors', () => {
  it('names custom error codes', () => {
    expect(programErrorName(6007)).toBe('NotExpired');
    expect(programErrorName(1)).toBeUndefined();
  });
});
