import type { Kysely } from 'kysely';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { AppError, contracts, postgresLimiterStore, retryAfterSeconds } from '@agenthost/shared';
import type { GatewayConfig } from '../config.ts';
import type { GatewayDB } from '../db/schema.ts';

type Limits = Pick<GatewayConfig, 'NONCES_PER_ADDRESS' | 'NONCES_PER_WALLET' | 'LOGINS_PER_ADDRESS' | 'LOGINS_PER_WALLET' | 'SIGN_IN_WINDOW_SECONDS'>;

const TABLE = 'sign_in_limits';

/** Auth's answers to a login that a wallet's key did not sign (or that carried no nonce of ours). */
const FAILED_SIGN_IN = new Set(['INVALID_SIGNATURE', 'NONCE_INVALID']);

/**
 * The public sign-in endpoints (nonce, login) limited per client address and, for one wallet, per client address
 * too, with rate-limiter-flexible counting in the gateway's Postgres schema, so that every replica sees the same
 * counts. A wallet's address is public: a count of one wallet across every client would let anyone lock its owner
 * out of sign-in with a few garbage requests. A client over a limit is also remembered in this replica's memory until
 * its window ends (inMemoryBlockOnConsumed): a flood costs the database one write per window and address, not one per
 * request.
 */
export class SignInLimits {
  private readonly nonces: { address: RateLimiterPostgres; wallet: RateLimiterPostgres };
  private readonly logins: { address: RateLimiterPostgres; failures: RateLimiterPostgres };

  constructor(db: Kysely<GatewayDB>, limits: Limits) {
    const store = postgresLimiterStore(db, TABLE); // made by the gateway's migration
    const limiter = (keyPrefix: string, points: number) =>
      new RateLimiterPostgres({
        ...store,
        keyPrefix,
        points,
        duration: limits.SIGN_IN_WINDOW_SECONDS,
        inMemoryBlockOnConsumed: points + 1,
        inMemoryBlockDuration: limits.SIGN_IN_WINDOW_SECONDS,
      });
    this.nonces = { address: limiter('nonce-addr', limits.NONCES_PER_ADDRESS), wallet: limiter('nonce-wallet-client', limits.NONCES_PER_WALLET) };
    this.logins = { address: limiter('login-addr', limits.LOGINS_PER_ADDRESS), failures: limiter('login-failed', limits.LOGINS_PER_WALLET) };
  }

  /** Count one nonce of this client address, and of the wallet it names from this address. Throws 429 over either. */
  async nonce(address: string, wallet: unknown): Promise<void> {
    const client = address || 'unknown';
    const key = walletKey(wallet, client);
    await limited('nonces', async () => {
      // The address first: a flooding address is refused from memory and costs no wallet row.
      await this.nonces.address.consume(client);
      if (key) await this.nonces.wallet.consume(key);
    });
  }

  /**
   * Run one login attempt of this client address: every attempt counts against the address (so a flood of
   * valid-looking unsigned logins costs no more than LOGINS_PER_ADDRESS calls to auth), and a wallet's failed
   * attempts from this address count against it, so a client cannot go on guessing for one wallet while its owner,
   * elsewhere, still signs in. Throws 429 over either.
   */
  async login<T>(address: string, wallet: unknown, attempt: () => Promise<T>): Promise<T> {
    const client = address || 'unknown';
    const key = walletKey(wallet, client);
    const failures = this.logins.failures;
    await limited('logins', async () => {
      await this.logins.address.consume(client);
      const failed = key ? await failures.get(key) : null;
      if (failed && failed.consumedPoints >= failures.points) throw failed;
    });
    try {
      return await attempt();
    } catch (err) {
      if (key && err instanceof AppError && FAILED_SIGN_IN.has(err.code)) {
        // A failure that cannot be counted still answers as it is: the address limit, counted before, bounds this client.
        await failures.penalty(key).catch(() => undefined);
      }
      throw err;
    }
  }
}

/** A wallet as asked for by one client address; none for a malformed wallet (refused with 400 later, no key worth a row). */
function walletKey(wallet: unknown, client: string): string | undefined {
  const valid = contracts.walletAddress.safeParse(wallet);
  return valid.success ? `${valid.data}@${client}` : undefined;
}

/** Runs the counting; a limit reached is 429 RATE_LIMITED with Retry-After, a store that does not answer 503. */
async function limited(what: 'nonces' | 'logins', count: () => Promise<void>): Promise<void> {
  try {
    await count();
  } catch (err) {
    if (err instanceof RateLimiterRes) {
      const retryAfter = retryAfterSeconds(err);
      throw new AppError('RATE_LIMITED', `Too many sign-in attempts (${what}); retry in ${retryAfter} s`, { retryAfter });
    }
    throw new AppError('SERVICE_UNAVAILABLE', 'Sign-in limits cannot be checked; retry shortly', { retryable: true, retryAfter: 1, cause: err });
  }
}
