/** Small native programs wallets commonly include: Compute Budget (accepted, no effect) and Memo v2. */
import { COMPUTE_BUDGET_PROGRAM_ID, MEMO_PROGRAM_ID } from '../accounts.ts';
import type { Program } from '../runtime.ts';

/** Compute-budget instructions are accepted and ignored: devchain charges only the base fee. */
export const computeBudgetProgram: Program = {
  id: COMPUTE_BUDGET_PROGRAM_ID,
  builtin: true,
  execute: () => null,
};

export const memoProgram: Program = {
  id: MEMO_PROGRAM_ID,
  builtin: false,
  execute(ctx) {
    for (const a of ctx.accounts) {
      if (!a.isSigner) {
        ctx.log(`Missing required signature for account ${a.key}`);
        return 'MissingRequiredSignature';
      }
    }
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(ctx.data);
    } catch {
      ctx.log('Invalid UTF-8');
      return 'InvalidInstructionData';
    }
    ctx.consume(300 + ctx.data.length * 10);
    ctx.log(`Memo (len ${ctx.data.length}): ${JSON.stringify(text)}`);
    return null;
  },
};
