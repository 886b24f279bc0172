import { type PublicKey, SystemProgram, TransactionInstruction } from '@solana/web3.js';
import { bytesEqual, instructionDiscriminator } from './discriminator.ts';
import { findSubscriptionAddress } from './layout.ts';
import { isTierId } from './tiers.ts';

export const INSTRUCTION_NAMES = ['subscribe', 'deposit', 'cancel', 'renew'] as const;
export type InstructionName = (typeof INSTRUCTION_NAMES)[number];

export type DecodedInstruction =
  | { name: 'subscribe'; args: { tier: number } }
  | { name: 'deposit'; args: { lamports: bigint } }
  | { name: 'cancel'; args: Record<string, never> }
  | { name: 'renew'; args: Record<string, never> };

const U64_MAX = (1n << 64n) - 1n;

export interface OwnerInstructionParams {
  programId: PublicKey;
  owner: PublicKey;
  treasury: PublicKey;
}

/** owner (signer, writable), subscription PDA (writable), treasury (writable), System Program. */
function ownerKeys(p: OwnerInstructionParams) {
  const [pda] = findSubscriptionAddress(p.programId, p.owner);
  return [
    { pubkey: p.owner, isSigner: true, isWritable: true },
    { pubkey: pda, isSigner: false, isWritable: true },
    { pubkey: p.treasury, isSigner: false, isWritable: true },
    { pubkey: SystemProgram.programId, isSigner: false, isWritable: false },
  ];
}

function data(name: InstructionName, args?: Uint8Array): Buffer {
  const disc = instructionDiscriminator(name);
  const out = Buffer.alloc(8 + (args?.length ?? 0));
  out.set(disc, 0);
  if (args) out.set(args, 8);
  return out;
}

export function subscribeInstruction(p: OwnerInstructionParams & { tier: number }): TransactionInstruction {
  if (!isTierId(p.tier)) throw new RangeError(`invalid tier ${String(p.tier)} (expected 0, 1 or 2)`);
  return new TransactionInstruction({ programId: p.programId, keys: ownerKeys(p), data: data('subscribe', Uint8Array.of(p.tier)) });
}

export function depositInstruction(p: OwnerInstructionParams & { lamports: bigint }): TransactionInstruction {
  if (typeof p.lamports !== 'bigint' || p.lamports < 0n || p.lamports > U64_MAX) {
    throw new RangeError(`invalid lamports ${String(p.lamports)} (expected a u64 bigint)`);
  }
  const arg = new Uint8Array(8);
  new DataView(arg.buffer).setBigUint64(0, p.lamports, true);
  return new TransactionInstruction({ programId: p.programId, keys: ownerKeys(p), data: data('deposit', arg) });
}

export function cancelInstruction(p: OwnerInstructionParams): TransactionInstruction {
  return new TransactionInstruction({ programId: p.programId, keys: ownerKeys(p), data: data('cancel') });
}

/** Anyone may call renew once the subscription expired: caller (signer, writable), PDA (writable), treasury (writable). */
export function renewInstruction(p: { programId: PublicKey; caller: PublicKey; owner: PublicKey; treasury: PublicKey }): TransactionInstruction {
  const [pda] = findSubscriptionAddress(p.programId, p.owner);
  return new TransactionInstruction({
    programId: p.programId,
    keys: [
      { pubkey: p.caller, isSigner: true, isWritable: true },
      { pubkey: pda, isSigner: false, isWritable: true },
      { pubkey: p.treasury, isSigner: false, isWritable: true },
    ],
    data: data('renew'),
  });
}

/**
 * Decodes instruction data of the subscription program. Returns null for an unknown
 * discriminator or a wrong data length. Values are not range-checked (tier may be > 2;
 * the program rejects that with InvalidTier).
 */
export function decodeInstruction(bytes: Uint8Array): DecodedInstruction | null {
  if (bytes.length < 8) return null;
  const disc = bytes.subarray(0, 8);
  const rest = bytes.subarray(8);
  for (const name of INSTRUCTION_NAMES) {
    if (!bytesEqual(disc, instructionDiscriminator(name))) continue;
    switch (name) {
      case 'subscribe':
        return rest.length === 1 ? { name, args: { tier: rest[0] as number } } : null;
      case 'deposit':
        return rest.length === 8 ? { name, args: { lamports: new DataView(rest.buffer, rest.byteOffset, 8).getBigUint64(0, true) } } : null;
      case 'cancel':
      case 'renew':
        return rest.length === 0 ? { name, args: {} } : null;
    }
  }
  return null;
}
