/**
 * The subscription program (design.md "The chain"), executed natively by devchain.
 * Encoding comes from @agenthost/subscription-program, so clients and chain agree.
 *
 * Semantics chosen here (the account layout is fixed by design.md):
 *  - subscribe(tier): owner signs; creates the PDA if missing (owner funds its rent-exempt
 *    minimum, 1_245_840 lamports for 51 bytes) and pays the tier price for the first period
 *    to the treasury. Result: tier set, is_active = true, expires_at = now + 30 days.
 *    If the subscription is active, unexpired and of the same tier, the new period is
 *    appended instead (expires_at += 30 days). A tier change, or an inactive/expired
 *    subscription, restarts the period from now. Clears a previous cancellation.
 *  - deposit(lamports): owner moves lamports into the PDA; everything above the rent-exempt
 *    minimum is the prepaid balance renew() draws from.
 *  - cancel(): owner marks the subscription cancelled. Nothing is refunded and the account
 *    data does not change (is_active stays true until expiry). The mark is program-private
 *    state (Account.cancelled); off-chain, cancellation is visible as the successful
 *    `cancel` transaction in getSignaturesForAddress(PDA) not followed by a successful
 *    `subscribe`. renew() after expiry then sets is_active = false.
 *  - renew(): anyone, once now >= expires_at (else NotExpired). Cancelled → is_active =
 *    false. Else if prepaid balance >= price → price moves PDA → treasury and
 *    expires_at += 30 days; else is_active = false. Renewing an inactive subscription
 *    fails with SubscriptionInactive.
 */
import { PublicKey } from '@solana/web3.js';
import {
  PERIOD_SECONDS,
  ProgramErrorCode,
  SUBSCRIPTION_ACCOUNT_SIZE,
  TIERS,
  decodeInstruction,
  decodeSubscription,
  encodeSubscription,
  findSubscriptionAddress,
  isTierId,
  programErrorMessage,
} from '@agenthost/subscription-program';
import type { ProgramErrorName, Subscription } from '@agenthost/subscription-program';
import { SYSTEM_PROGRAM_ID, rentExemptMinimum } from '../accounts.ts';
import type { Account } from '../accounts.ts';
import type { Prices } from '../config.ts';
import type { InstructionError } from '../errors.ts';
import type { AccountMeta, InstructionContext, Program } from '../runtime.ts';
import { createAccountData, transferData } from './system.ts';

const RENT_MIN = rentExemptMinimum(SUBSCRIPTION_ACCOUNT_SIZE);
const PERIOD = PERIOD_SECONDS;

const iso = (unix: number): string => new Date(unix * 1000).toISOString();

function fail(ctx: InstructionContext, name: ProgramErrorName, detail?: string): InstructionError {
  const code = ProgramErrorCode[name];
  ctx.log(`AnchorError occurred. Error Code: ${name}. Error Number: ${code}. Error Message: ${programErrorMessage(code)}${detail ? ` (${detail})` : ''}.`);
  return { Custom: code };
}

interface Loaded {
  account: Account;
  state: Subscription;
}

export function createSubscriptionProgram(cfg: { programId: string; treasury: string; prices: Prices }): Program {
  const programId = new PublicKey(cfg.programId);
  const programIdBytes = programId.toBytes();
  const price = (tier: number): bigint => BigInt(cfg.prices[TIERS[tier] as keyof Prices]);

  /** The PDA as a program-owned Subscription, or null if it does not exist / is not initialized. */
  function load(ctx: InstructionContext, key: string): Loaded | 'corrupt' | null {
    const account = ctx.get(key);
    if (!account || account.owner !== cfg.programId) return null;
    try {
      return { account, state: decodeSubscription(account.data) };
    } catch {
      return 'corrupt';
    }
  }

  function write(ctx: InstructionContext, key: string, account: Account, state: Subscription, cancelled: boolean): void {
    ctx.set(key, { ...ctx.get(key)!, owner: account.owner, data: encodeSubscription(state), cancelled });
  }

  /** Shared checks of subscribe/deposit/cancel: owner signer, PDA, treasury, System Program. */
  function ownerAccounts(ctx: InstructionContext): { owner: AccountMeta; pda: AccountMeta; bump: number } | { error: InstructionError } {
    const [owner, pda, treasury, system] = ctx.accounts;
    if (!owner || !pda || !treasury || !system) return { error: fail(ctx, 'InvalidAccounts', 'expected owner, subscription, treasury, system program') };
    if (!owner.isSigner) return { error: fail(ctx, 'MissingSignature', `owner ${owner.key}`) };
    if (!owner.isWritable || !pda.isWritable || !treasury.isWritable)
      return { error: fail(ctx, 'InvalidAccounts', 'owner, subscription and treasury must be writable') };
    if (system.key !== SYSTEM_PROGRAM_ID) return { error: fail(ctx, 'InvalidAccounts', 'fourth account must be the System Program') };
    const [expected, bump] = findSubscriptionAddress(programId, new PublicKey(owner.key));
    if (expected.toBase58() !== pda.key) return { error: fail(ctx, 'InvalidSubscriptionAddress') };
    if (treasury.key !== cfg.treasury) return { error: fail(ctx, 'InvalidTreasury') };
    return { owner, pda, bump };
  }

  function subscribe(ctx: InstructionContext, tier: number): InstructionError | null {
    const accs = ownerAccounts(ctx);
    if ('error' in accs) return accs.error;
    const { owner, pda, bump } = accs;
    if (!isTierId(tier)) return fail(ctx, 'InvalidTier', `got ${tier}`);
    const existing = load(ctx, pda.key);
    if (existing === 'corrupt') return fail(ctx, 'InvalidAccounts', 'subscription account data is not a Subscription');
    if (existing && existing.state.owner.toBase58() !== owner.key) return fail(ctx, 'OwnerMismatch');
    const raw = ctx.get(pda.key);
    if (!existing && raw && raw.owner !== SYSTEM_PROGRAM_ID) return fail(ctx, 'InvalidAccounts', 'subscription address is owned by another program');
    const topUp = existing ? 0n : RENT_MIN > (raw?.lamports ?? 0n) ? RENT_MIN - (raw?.lamports ?? 0n) : 0n;
    const cost = price(tier);
    const balance = ctx.get(owner.key)?.lamports ?? 0n;
    if (balance < cost + topUp) return fail(ctx, 'InsufficientFunds', `have ${balance}, need ${cost + topUp}`);

    const ownerMeta = { key: owner.key, isSigner: true, isWritable: true };
    // The PDA signs its own creation with its seeds.
    const pdaMeta = { key: pda.key, isSigner: true, isWritable: true };
    if (!existing) {
      const e =
        (raw?.lamports ?? 0n) === 0n
          ? ctx.invoke(SYSTEM_PROGRAM_ID, [ownerMeta, pdaMeta], createAccountData(RENT_MIN, SUBSCRIPTION_ACCOUNT_SIZE, programIdBytes))
          : topUp > 0n
            ? ctx.invoke(SYSTEM_PROGRAM_ID, [ownerMeta, pdaMeta], transferData(topUp))
            : null;
      if (e !== null) return e;
    }
    if (cost > 0n) {
      const e = ctx.invoke(SYSTEM_PROGRAM_ID, [ownerMeta, { key: cfg.treasury, isSigner: false, isWritable: true }], transferData(cost));
      if (e !== null) return e;
    }
    const prev = existing?.state;
    const extend = prev?.isActive && prev.expiresAt > ctx.now && prev.tier === tier;
    const expiresAt = extend ? prev.expiresAt + PERIOD : ctx.now + PERIOD;
    const state: Subscription = { tier, expiresAt, isActive: true, owner: new PublicKey(owner.key), bump };
    write(ctx, pda.key, { ...(ctx.get(pda.key) as Account), owner: cfg.programId }, state, false);
    ctx.log(`Subscribed ${owner.key} to ${TIERS[tier]} until ${iso(expiresAt)}${extend ? ' (period appended)' : ''}`);
    return null;
  }

  function deposit(ctx: InstructionContext, lamports: bigint): InstructionError | null {
    const accs = ownerAccounts(ctx);
    if ('error' in accs) return accs.error;
    const { owner, pda } = accs;
    if (lamports === 0n) return fail(ctx, 'InvalidAmount');
    const existing = load(ctx, pda.key);
    if (existing === null) return fail(ctx, 'SubscriptionNotFound');
    if (existing === 'corrupt') return fail(ctx, 'InvalidAccounts', 'subscription account data is not a Subscription');
    const balance = ctx.get(owner.key)?.lamports ?? 0n;
    if (balance < lamports) return fail(ctx, 'InsufficientFunds', `have ${balance}, need ${lamports}`);
    const e = ctx.invoke(
      SYSTEM_PROGRAM_ID,
      [
        { key: owner.key, isSigner: true, isWritable: true },
        { key: pda.key, isSigner: false, isWritable: true },
      ],
      transferData(lamports),
    );
    if (e !== null) return e;
    const after = ctx.get(pda.key) as Account;
    ctx.log(`Deposited ${lamports} lamports; prepaid balance ${after.lamports - RENT_MIN}`);
    return null;
  }

  function cancel(ctx: InstructionContext): InstructionError | null {
    const accs = ownerAccounts(ctx);
    if ('error' in accs) return accs.error;
    const existing = load(ctx, accs.pda.key);
    if (existing === null) return fail(ctx, 'SubscriptionNotFound');
    if (existing === 'corrupt') return fail(ctx, 'InvalidAccounts', 'subscription account data is not a Subscription');
    if (!existing.state.isActive) return fail(ctx, 'SubscriptionInactive');
    if (existing.account.cancelled) return fail(ctx, 'AlreadyCancelled');
    write(ctx, accs.pda.key, existing.account, existing.state, true);
    ctx.log(`Subscription cancelled; active until ${iso(existing.state.expiresAt)}`);
    return null;
  }

  function renew(ctx: InstructionContext): InstructionError | null {
    const [caller, pda, treasury] = ctx.accounts;
    if (!caller || !pda || !treasury) return fail(ctx, 'InvalidAccounts', 'expected caller, subscription, treasury');
    if (!caller.isSigner) return fail(ctx, 'MissingSignature', `caller ${caller.key}`);
    if (!pda.isWritable || !treasury.isWritable) return fail(ctx, 'InvalidAccounts', 'subscription and treasury must be writable');
    const existing = load(ctx, pda.key);
    if (existing === null) return fail(ctx, 'SubscriptionNotFound');
    if (existing === 'corrupt') return fail(ctx, 'InvalidAccounts', 'subscription account data is not a Subscription');
    const { account, state } = existing;
    const [expected] = findSubscriptionAddress(programId, state.owner);
    if (expected.toBase58() !== pda.key) return fail(ctx, 'InvalidSubscriptionAddress');
    if (treasury.key !== cfg.treasury) return fail(ctx, 'InvalidTreasury');
    if (!state.isActive) return fail(ctx, 'SubscriptionInactive');
    if (ctx.now < state.expiresAt) return fail(ctx, 'NotExpired', `expires at ${iso(state.expiresAt)}`);

    if (account.cancelled) {
      write(ctx, pda.key, account, { ...state, isActive: false }, true);
      ctx.log('Subscription was cancelled; deactivated');
      return null;
    }
    const cost = price(state.tier);
    const prepaid = account.lamports - RENT_MIN;
    if (prepaid < cost) {
      write(ctx, pda.key, account, { ...state, isActive: false }, false);
      ctx.log(`Prepaid balance ${prepaid} below price ${cost}; deactivated`);
      return null;
    }
    const expiresAt = state.expiresAt + PERIOD;
    ctx.set(pda.key, { ...account, lamports: account.lamports - cost, data: encodeSubscription({ ...state, expiresAt }) });
    const t = ctx.get(cfg.treasury) ?? { lamports: 0n, data: new Uint8Array(), owner: SYSTEM_PROGRAM_ID, executable: false };
    ctx.set(cfg.treasury, { ...t, lamports: t.lamports + cost });
    ctx.log(`Renewed ${TIERS[state.tier]} until ${iso(expiresAt)}; paid ${cost} lamports`);
    return null;
  }

  return {
    id: cfg.programId,
    builtin: false,
    execute(ctx) {
      ctx.consume(4_000);
      const ix = decodeInstruction(ctx.data);
      if (ix === null) return fail(ctx, 'InvalidInstructionData');
      ctx.log(`Instruction: ${ix.name[0]!.toUpperCase()}${ix.name.slice(1)}`);
      switch (ix.name) {
        case 'subscribe':
          return subscribe(ctx, ix.args.tier);
        case 'deposit':
          return deposit(ctx, ix.args.lamports);
        case 'cancel':
          return cancel(ctx);
        case 'renew':
          return renew(ctx);
      }
    },
  };
}
