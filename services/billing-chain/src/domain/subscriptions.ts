import type { Kysely, Selectable } from 'kysely';
import { LRUCache } from 'lru-cache';
import { TIERS } from '@agenthost/subscription-program';
import { AppError, isUniqueViolation, type contracts, type Logger } from '@agenthost/shared';
import type { BillingDB } from '../db/schema.ts';
import type { ChainClient, ChainSubscription } from './chain.ts';
import { checkSignatureFormat, checkTier, verifySubscribeTx } from './verify.ts';

export type Row = Selectable<BillingDB['subscriptions']>;
export type View = contracts.billing.Subscription;
export type ChangeReason = 'registered' | 'refreshed' | 'renewed' | 'expired' | 'cancelled' | 'picked_up';
type Who = { user_id: string; wallet_address: string };
type SyncOptions = { reason: ChangeReason; userId?: string; history?: boolean; msgId?: string };

export interface SubscriptionsDeps {
  db: Kysely<BillingDB>;
  chain: ChainClient;
  log: Logger;
  /** SUBSCRIPTION_CACHE_TTL_SECONDS in ms. */
  ttlMs: number;
  /** Publish events.subscription.changed (failures are logged by the caller, never fatal). */
  publish: (payload: View & { reason: ChangeReason; user_id?: string | null }, msgId?: string) => Promise<void>;
  now?: () => number;
}

/** The formatted dates of a row (rows are not changed in place: a change is a new row). */
const isoDates = new WeakMap<Row, { expires_at: string; refreshed_at: string }>();

/** How long a replica answers status from memory before looking at its database row again. */
const MEMO_MS = 1000;
/**
 * How long a replica remembers that a wallet has no subscription account on chain: a refresh for it then costs
 * no chain reads (three each otherwise). register always reads the chain, so a payment is seen at once.
 */
const NO_ACCOUNT_MS = 30_000;

/**
 * The cache of on-chain subscriptions. Postgres holds the cached record (refreshed_at decides its
 * age against the TTL); each replica keeps a one-second memo of rows in front of it so the hot status
 * path costs no query; the memo is dropped on every change this or another replica announces. The memo is an
 * lru-cache: fetch() reads a wallet's row once however many requests want it, and drops the row of a read that was
 * in flight while the memo was set or dropped (ignoreFetchAbort: the caller still gets it, the memo does not).
 */
export class Subscriptions {
  private readonly deps: SubscriptionsDeps;
  private readonly memo: LRUCache<string, { row: Row | null }>;
  private readonly inflight = new Map<string, Promise<Row | null>>();
  /** Wallets whose refresh found no account on chain (for NO_ACCOUNT_MS). */
  private readonly noAccount = new LRUCache<string, true>({ max: 50_000, ttl: NO_ACCOUNT_MS });

  constructor(deps: SubscriptionsDeps) {
    this.deps = deps;
    this.memo = new LRUCache<string, { row: Row | null }>({
      max: 50_000,
      ttl: MEMO_MS,
      ignoreFetchAbort: true,
      fetchMethod: async (wallet) => {
        const row = (await this.deps.db.selectFrom('subscriptions').selectAll().where('wallet_address', '=', wallet).executeTakeFirst()) ?? null;
        if (row) this.noAccount.delete(wallet);
        return { row };
      },
    });
  }

  private now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  /** The API view: active = active on chain and not past expires_at in chain time. */
  view(row: Row): View {
    // A memoised row answers thousands of status requests a second: its dates are formatted once.
    let dates = isoDates.get(row);
    if (!dates) isoDates.set(row, (dates = { expires_at: row.expires_at.toISOString(), refreshed_at: row.refreshed_at.toISOString() }));
    return {
      wallet_address: row.wallet_address,
      tier: TIERS[row.tier as 0 | 1 | 2],
      is_active: row.chain_active && row.expires_at.getTime() > this.deps.chain.estimatedNow(),
      expires_at: dates.expires_at,
      cancelled: row.cancelled,
      refreshed_at: dates.refreshed_at,
    };
  }

  forget(wallet: string): void {
    this.memo.delete(wallet);
    this.noAccount.delete(wallet);
  }

  private async load(wallet: string): Promise<Row | null> {
    // A memo just past its second answers while the row is read again, so the status requests of a busy
    // wallet do not all queue behind that read once a second. Changes drop the memo at once (forget).
    const pastTtl = -this.memo.getRemainingTTL(wallet);
    return (await this.memo.fetch(wallet, { allowStale: pastTtl >= 0 && pastTtl < MEMO_MS }))!.row;
  }

  private remember(wallet: string, row: Row | null): void {
    if (row) this.noAccount.delete(wallet);
    this.memo.set(wallet, { row });
  }

  // ---- register ---------------------------------------------------------------------------------

  async register(input: Who & { tx_signature: string; tier: number }) {
    const { wallet_address: wallet, user_id, tx_signature: sig } = input;
    checkSignatureFormat(sig);
    checkTier(input.tier);
    const used = await this.deps.db.selectFrom('used_signatures').select('wallet_address').where('signature', '=', sig).executeTakeFirst();
    if (used) return this.registeredAgain(used.wallet_address, wallet);

    const tx = await this.deps.chain.transaction(sig);
    if (!tx) throw new AppError('TRANSACTION_NOT_FOUND', undefined, { retryable: true, retryAfter: 2 });
    const { pda } = verifySubscribeTx(tx, { programId: this.deps.chain.programId.toBase58(), wallet, tier: input.tier });
    if (pda !== this.deps.chain.pdaOf(wallet)) throw new AppError('SUBSCRIPTION_ACCOUNT_INVALID');
    // The transaction is confirmed, so the account it wrote exists at the same commitment.
    const [account, cancelled] = await Promise.all([this.deps.chain.subscription(wallet), this.deps.chain.cancelledFromHistory(wallet), this.deps.chain.now()]);
    if (!account) throw new AppError('SUBSCRIPTION_ACCOUNT_INVALID');

    let row: Row;
    try {
      row = await this.deps.db.transaction().execute(async (trx) => {
        await trx.insertInto('used_signatures').values({ signature: sig, wallet_address: wallet, user_id, tier: input.tier, slot: tx.slot }).execute();
        return storeSubscription(trx, account, { user_id, cancelled: cancelled ?? false, refreshed_at: new Date(this.now()) });
      });
    } catch (err) {
      if (!isUniqueViolation(err, 'used_signatures_pkey')) throw err;
      // A concurrent retry of the same registration got there first.
      const first = await this.deps.db.selectFrom('used_signatures').select('wallet_address').where('signature', '=', sig).executeTakeFirst();
      return this.registeredAgain(first?.wallet_address, wallet);
    }
    this.remember(wallet, row);
    const view = this.view(row);
    this.deps.log.info({ wallet_address: wallet, tier: view.tier, tx_signature: sig, expires_at: view.expires_at }, 'subscription registered');
    await this.deps.publish({ ...view, reason: 'registered', user_id }, `registered:${sig}`);
    return registeredAnswer(view);
  }

  /**
   * A signature registered before: by the same wallet it is a retry (a lost answer, say) of a payment
   * that succeeded, answered with the wallet's subscription as it stands; by another wallet, a 400.
   */
  private async registeredAgain(usedBy: string | undefined, wallet: string) {
    if (usedBy !== wallet) throw new AppError('TX_ALREADY_USED');
    const row = await this.load(wallet);
    if (!row) throw new AppError('SUBSCRIPTION_NOT_FOUND');
    return registeredAnswer(this.view(row));
  }

  // ---- status / refresh -------------------------------------------------------------------------

  /**
   * The cached record: younger than the TTL → as is; older → re-read from the chain. If the chain
   * cannot be read then, the stale record is served (logged), because entitlement must not flap
   * with the RPC; a forced refresh, by contrast, reports CHAIN_UNAVAILABLE. user_id: only a user id the
   * gateway asserted (a service reading a wallet's public record names none), recorded for a wallet without one.
   */
  async status(who: { wallet_address: string; user_id: string | undefined }): Promise<View> {
    const row = await this.load(who.wallet_address);
    if (!row) throw new AppError('SUBSCRIPTION_NOT_FOUND');
    if (row.user_id === null && who.user_id) void this.adopt({ wallet_address: who.wallet_address, user_id: who.user_id }).catch(() => {});
    if (this.now() - row.refreshed_at.getTime() < this.deps.ttlMs) return this.view(row);
    try {
      const fresh = await this.sync(who.wallet_address, { reason: 'refreshed', userId: who.user_id });
      return this.view(fresh ?? row);
    } catch (err) {
      if (!(err instanceof AppError) || (err.code !== 'CHAIN_UNAVAILABLE' && err.code !== 'SUBSCRIPTION_ACCOUNT_INVALID')) throw err;
      this.deps.log.warn(
        { wallet_address: who.wallet_address, code: err.code, refreshed_at: row.refreshed_at.toISOString() },
        'chain unreadable: serving the stale cached subscription',
      );
      return this.view(row);
    }
  }

  /** Re-read from the chain now. A subscription made without register is adopted here too. */
  async refresh(who: Who): Promise<View> {
    const wallet = who.wallet_address;
    if (this.noAccount.has(wallet)) throw new AppError('SUBSCRIPTION_NOT_FOUND');
    const row = await this.sync(wallet, { reason: 'refreshed', userId: who.user_id, fresh: true });
    if (!row) {
      this.noAccount.set(wallet, true);
      throw new AppError('SUBSCRIPTION_NOT_FOUND');
    }
    return this.view(row);
  }

  private async adopt(who: Who): Promise<void> {
    await this.deps.db
      .updateTable('subscriptions')
      .set({ user_id: who.user_id })
      .where('wallet_address', '=', who.wallet_address)
      .where('user_id', 'is', null)
      .execute();
  }

  /**
   * Read the wallet's subscription from the chain and store it; publish a change event when anything
   * an API client can see changed. Cancelled or not is read from the wallet's history (or kept, with history: false:
   * a renewal changes nothing about it). One read per wallet at a time: a
   * caller joins the read in flight, except a `fresh` one (a forced refresh, asked after a change the caller made),
   * which waits for it and reads again, since that read may have begun before the change.
   */
  sync(wallet: string, opts: SyncOptions & { fresh?: boolean }): Promise<Row | null> {
    const running = this.inflight.get(wallet);
    if (running && !opts.fresh) return running;
    const p: Promise<Row | null> = (running ? running.catch(() => null).then(() => this.doSync(wallet, opts)) : this.doSync(wallet, opts)).finally(() => {
      if (this.inflight.get(wallet) === p) this.inflight.delete(wallet);
    });
    this.inflight.set(wallet, p);
    return p;
  }

  private async doSync(wallet: string, opts: SyncOptions): Promise<Row | null> {
    const prev = (await this.deps.db.selectFrom('subscriptions').selectAll().where('wallet_address', '=', wallet).executeTakeFirst()) ?? null;
    const wantHistory = opts.history ?? true;
    const [account, fromHistory] = await Promise.all([
      this.deps.chain.subscription(wallet),
      wantHistory ? this.deps.chain.cancelledFromHistory(wallet) : Promise.resolve(null),
      this.deps.chain.now(),
    ]);
    if (!account) {
      this.remember(wallet, prev);
      return prev;
    }
    const cancelled = fromHistory ?? prev?.cancelled ?? false;
    const row = await storeSubscription(this.deps.db, account, { user_id: opts.userId ?? null, cancelled, refreshed_at: new Date(this.now()) });
    this.remember(wallet, row);
    const after = this.view(row);
    const changed =
      !prev ||
      prev.tier !== row.tier ||
      prev.expires_at.getTime() !== row.expires_at.getTime() ||
      prev.chain_active !== row.chain_active ||
      prev.cancelled !== row.cancelled;
    if (changed) {
      let reason: ChangeReason = opts.reason;
      if ((reason === 'renewed' || reason === 'refreshed') && !row.chain_active && prev?.chain_active) reason = 'expired';
      else if (reason === 'refreshed' && row.cancelled && !prev?.cancelled) reason = 'cancelled';
      this.deps.log.info(
        { wallet_address: wallet, reason, tier: after.tier, is_active: after.is_active, cancelled: after.cancelled, expires_at: after.expires_at },
        'subscription changed',
      );
      await this.deps.publish({ ...after, reason, user_id: row.user_id }, opts.msgId);
    }
    return row;
  }
}

/** Insert or update the cached record of a wallet's on-chain subscription; safe with other writers of the same wallet at once. */
export async function storeSubscription(
  db: Kysely<BillingDB>,
  a: ChainSubscription,
  extra: { user_id: string | null; cancelled: boolean; refreshed_at: Date },
): Promise<Row> {
  const values = {
    wallet_address: a.wallet,
    user_id: extra.user_id,
    pda: a.pda,
    tier: a.tier,
    expires_at: new Date(a.expiresAt * 1000),
    chain_active: a.isActive,
    cancelled: extra.cancelled,
    lamports: a.lamports,
    refreshed_at: extra.refreshed_at,
  };
  return db
    .insertInto('subscriptions')
    .values(values)
    .onConflict((c) =>
      c.column('wallet_address').doUpdateSet((eb) => ({
        user_id: eb.fn.coalesce('excluded.user_id', 'subscriptions.user_id'),
        tier: eb.ref('excluded.tier'),
        expires_at: eb.ref('excluded.expires_at'),
        chain_active: eb.ref('excluded.chain_active'),
        cancelled: eb.ref('excluded.cancelled'),
        lamports: eb.ref('excluded.lamports'),
        refreshed_at: eb.ref('excluded.refreshed_at'),
        updated_at: new Date(),
      })),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

const registeredAnswer = (view: Pick<contracts.billing.Subscription, 'tier' | 'is_active' | 'expires_at' | 'cancelled'>) => ({
  success: true,
  subscription: { tier: view.tier, is_active: view.is_active, expires_at: view.expires_at, cancelled: view.cancelled },
  tx_verified: true,
});
