import { CompiledQuery, type Kysely } from 'kysely';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { AppError, contracts } from '@agenthost/shared';
import type { GatewayConfig } from '../config.ts';
import type { GatewayDB } from '../db/schema.ts';

type Kind = 'nonce' | 'login';
type Limits = Pick<GatewayConfig, 'NONCES_PER_ADDRESS' | 'NONCES_PER_WALLET' | 'LOGINS_PER_ADDRESS' | 'LOGINS_PER_WALLET' | 'SIGN_IN_WINDOW_SECONDS'>;

const TABLE = 'sign_in_limits';

/**
 * The public sign-in endpoints (nonce, login) limited per client address and per wallet, with rate-limiter-flexible
 * counting in the gateway's Postgres schema, so that every replica sees the same counts. A client over a limit is
 * also remembered in this replica's memory until its window ends (inMemoryBlockOnConsumed): a flood costs the
 * database one write per window and address, not one per request.
 */
export class SignInLimits {
  private readonly limiters: Record<Kind, { address: RateLimiterPostgres; wallet: RateLimiterPostgres }>;

  constructor(db: Kysely<GatewayDB>, limits: Limits) {
    // rate-limiter-flexible speaks to a pg client's query(); the gateway's own pool answers through Kysely.
    const storeClient = { query: (q: { text: string; values?: unknown[] }) => db.executeQuery(CompiledQuery.raw(q.text, q.values ?? [])) };
    const limiter = (keyPrefix: string, points: number) =>
      new RateLimiterPostgres({
        storeClient,
        storeType: 'pool',
        tableName: TABLE,
        tableCreated: true, // by the gateway's migration
        clearExpiredByTimeout: true,
        keyPrefix,
        points,
        duration: limits.SIGN_IN_WINDOW_SECONDS,
        inMemoryBlockOnConsumed: points + 1,
        inMemoryBlockDuration: limits.SIGN_IN_WINDOW_SECONDS,
      });
    this.limiters = {
      nonce: { address: limiter('nonce-addr', limits.NONCES_PER_ADDRESS), wallet: limiter('nonce-wallet', limits.NONCES_PER_WALLET) },
      login: { address: limiter('login-addr', limits.LOGINS_PER_ADDRESS), wallet: limiter('login-wallet', limits.LOGINS_PER_WALLET) },
    };
  }

  /**
   * Count one nonce or login of this client address (and wallet, when it is one: a malformed address is refused
   * with 400 later and is no key worth a row). Throws 429 RATE_LIMITED with Retry-After over either limit.
   */
  async consume(kind: Kind, address: string, wallet: unknown): Promise<void> {
    const l = this.limiters[kind];
    const valid = contracts.walletAddress.safeParse(wallet);
    try {
      // The address first: a flooding address is refused from memory and costs no wallet row.
      await l.address.consume(address || 'unknown');
      if (valid.success) await l.wallet.consume(valid.data);
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        const retryAfter = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
        throw new AppError('RATE_LIMITED', `Too many sign-in attempts (${kind === 'nonce' ? 'nonces' : 'logins'}); retry in ${retryAfter} s`, { retryAfter });
      }
      throw new AppError('SERVICE_UNAVAILABLE', 'Sign-in limits cannot be checked; retry shortly', { retryable: true, retryAfter: 1, cause: err });
    }
  }
}
