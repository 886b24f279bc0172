import { AppError, contracts, type Contract } from '@agenthost/shared';
import type { z } from 'zod';

export type Subscription = contracts.billing.Subscription;
type Call = <C extends Contract>(c: C, input: z.input<C['input']>, requestId?: string) => Promise<z.output<C['output']>>;

/** A subscription grants access while active and not past expires_at (a cancelled one until expires_at). */
export const isEntitled = (s: Subscription | null, now = Date.now()): s is Subscription =>
  !!s && s.is_active && Date.parse(s.expires_at) > now;

/** The caller's subscription as billing-chain knows it (null when there is none). */
export class Entitlements {
  private readonly call: Call;
  constructor(call: Call) {
    this.call = call;
  }

  async lookup(user: { user_id: string; wallet_address: string }, requestId?: string): Promise<Subscription | null> {
    try {
      return await this.call(contracts.billing.status, user, requestId);
    } catch (err) {
      if (err instanceof AppError && err.code === 'SUBSCRIPTION_NOT_FOUND') return null;
      throw err;
    }
  }

  /** Forget what is known of a wallet (after register/refresh through this gateway). */
  invalidate(_wallet: string): void {}
}
