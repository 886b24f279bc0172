/** System Program: transfer and createAccount (other instructions fail with InvalidInstructionData). */
import { SYSTEM_PROGRAM_ID } from '../accounts.ts';
import { b58encode } from '../encoding.ts';
import type { InstructionError } from '../errors.ts';
import type { InstructionContext, Program } from '../runtime.ts';

const MAX_PERMITTED_DATA_LENGTH = 10 * 1024 * 1024;

/** SystemError custom codes. */
const SystemError = { AccountAlreadyInUse: 0, ResultWithNegativeLamports: 1, InvalidAccountDataLength: 3 } as const;

function debit(ctx: InstructionContext, from: string, to: string, lamports: bigint): InstructionError | null {
  const src = ctx.get(from);
  const have = src?.lamports ?? 0n;
  if (src && src.data.length > 0) {
    ctx.log('Transfer: `from` must not carry data');
    return 'InvalidArgument';
  }
  if (src && src.owner !== SYSTEM_PROGRAM_ID) return 'ExternalAccountLamportSpend';
  if (have < lamports) {
    ctx.log(`Transfer: insufficient lamports ${have}, need ${lamports}`);
    return { Custom: SystemError.ResultWithNegativeLamports };
  }
  if (lamports === 0n || from === to) return null;
  ctx.set(from, { ...(src as NonNullable<typeof src>), lamports: have - lamports });
  const dst = ctx.get(to) ?? { lamports: 0n, data: new Uint8Array(), owner: SYSTEM_PROGRAM_ID, executable: false };
  ctx.set(to, { ...dst, lamports: dst.lamports + lamports });
  return null;
}

function transfer(ctx: InstructionContext, data: DataView): InstructionError | null {
  const [from, to] = ctx.accounts;
  if (!from || !to) return 'NotEnoughAccountKeys';
  if (data.byteLength < 12) return 'InvalidInstructionData';
  if (!from.isSigner) {
    ctx.log(`Transfer: \`from\` account ${from.key} must sign`);
    return 'MissingRequiredSignature';
  }
  return debit(ctx, from.key, to.key, data.getBigUint64(4, true));
}

function createAccount(ctx: InstructionContext, data: DataView, bytes: Uint8Array): InstructionError | null {
  const [from, to] = ctx.accounts;
  if (!from || !to) return 'NotEnoughAccountKeys';
  if (data.byteLength < 52) return 'InvalidInstructionData';
  const lamports = data.getBigUint64(4, true);
  const space = data.getBigUint64(12, true);
  const owner = b58encode(bytes.subarray(20, 52));
  if (!from.isSigner) {
    ctx.log(`Transfer: \`from\` account ${from.key} must sign`);
    return 'MissingRequiredSignature';
  }
  if (!to.isSigner) {
    ctx.log(`Create Account: \`to\` account ${to.key} must sign`);
    return 'MissingRequiredSignature';
  }
  const existing = ctx.get(to.key);
  if (existing && (existing.lamports > 0n || existing.data.length > 0 || existing.owner !== SYSTEM_PROGRAM_ID)) {
    ctx.log(`Create Account: account Address { address: ${to.key}, base: None } already in use`);
    return { Custom: SystemError.AccountAlreadyInUse };
  }
  if (space > BigInt(MAX_PERMITTED_DATA_LENGTH)) {
    ctx.log(`Allocate: requested ${space}, max allowed ${MAX_PERMITTED_DATA_LENGTH}`);
    return { Custom: SystemError.InvalidAccountDataLength };
  }
  const e = debit(ctx, from.key, to.key, lamports);
  if (e !== null) return e;
  const created = ctx.get(to.key) ?? { lamports: 0n, data: new Uint8Array(), owner: SYSTEM_PROGRAM_ID, executable: false };
  ctx.set(to.key, { ...created, data: new Uint8Array(Number(space)), owner });
  return null;
}

export const systemProgram: Program = {
  id: SYSTEM_PROGRAM_ID,
  builtin: true,
  execute(ctx) {
    if (ctx.data.length < 4) return 'InvalidInstructionData';
    const view = new DataView(ctx.data.buffer, ctx.data.byteOffset, ctx.data.byteLength);
    switch (view.getUint32(0, true)) {
      case 0:
        return createAccount(ctx, view, ctx.data);
      case 2:
        return transfer(ctx, view);
      default:
        return 'InvalidInstructionData';
    }
  },
};

/** System Program instruction data for a CPI transfer. */
export function transferData(lamports: bigint): Uint8Array {
  const out = new Uint8Array(12);
  const v = new DataView(out.buffer);
  v.setUint32(0, 2, true);
  v.setBigUint64(4, lamports, true);
  return out;
}

/** System Program instruction data for a CPI createAccount. */
export function createAccountData(lamports: bigint, space: number, owner: Uint8Array): Uint8Array {
  const out = new Uint8Array(52);
  const v = new DataView(out.buffer);
  v.setUint32(0, 0, true);
  v.setBigUint64(4, lamports, true);
  v.setBigUint64(12, BigInt(space), true);
  out.set(owner, 20);
  return out;
}
