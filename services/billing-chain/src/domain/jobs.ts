import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Keypair } from '@solana/web3.js';
import { ProgramErrorCode, decodeSubscription } from '@agenthost/subscription-program';
import { PublicKey } from '@solana/web3.js';
import type { z } from 'zod';
import type { contracts, Logger } from '@agenthost/shared';
import type { BillingDB } from '../db/schema.ts';
import type { ChainClient, SignatureInfo } from './chain.ts';
import { ownerOf, programInstructions } from './transactions.ts';
import type { ChangeReason, Subscriptions } from './subscriptions.ts';

export interface JobsDeps {
  db: Kysely<BillingDB>;
  chain: ChainClient;
  subs: Subscriptions;
  keeper: Keypair;
  log: Logger;
  intervalMs: number;
  airdrop: boolean;
  /** Publish events.subscription.expiring (errors are the caller's to log; the warning is then tried again). */
  expiring: (payload: z.input<typeof contracts.billing.subscriptionExpiring.payload>, msgId: string) => Promise<void>;
}

/** How far ahead a subscription's end is announced. */
const EXPIRING_WITHIN_MS = 3 * 24 * 3600_000;

const CURSOR = 'program';
const MAX_PAGES = 10;
const KEEPER_MIN_LAMPORTS = 50_000_000;
const KEEPER_TOP_UP = 1_000_000_000;

/**
 * The background work of billing-chain, run by one replica at a time (a lease row in the billing
 * schema): pick-up of the program's transactions made without register, then the renewal keeper.
 */
export class Jobs {
  private readonly deps: JobsDeps;
  private readonly holder = randomUUID();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private lastAirdropFailure = 0;

  constructor(deps: JobsDeps) {
    this.deps = deps;
  }

  start(): void {
    const loop = () => {
      if (this.stopped) return;
      this.running = this.tick().finally(() => {
        this.running = undefined;
        if (!this.stopped) this.timer = setTimeout(loop, this.deps.intervalMs);
      });
    };
    this.timer = setTimeout(loop, Math.min(this.deps.intervalMs, 500));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    await this.deps.db
      .deleteFrom('leases')
      .where('name', '=', 'jobs')
      .where('holder', '=', this.holder)
      .execute()
      .catch(() => {});
  }

  /** One round: pick-up, then renewals. Errors are logged; the next round retries. */
  async tick(): Promise<void> {
    try {
      if (!(await this.lease())) return;
      await this.pickUp();
      await this.renewDue();
      await this.warnExpiring();
    } catch (err) {
      this.deps.log.warn({ err }, 'billing background round failed; will retry');
    }
  }

  private async lease(): Promise<boolean> {
    const ttl = `${Math.max(3, Math.ceil((this.deps.intervalMs * 3) / 1000))} seconds`;
    const r = await sql<{ holder: string }>`
      insert into leases (name, holder, expires_at) values ('jobs', ${this.holder}, now() + ${ttl}::interval)
      on conflict (name) do update set holder = excluded.holder, expires_at = excluded.expires_at
        where leases.holder = excluded.holder or leases.expires_at < now()
      returning holder`.execute(this.deps.db);
    return r.rows.length > 0;
  }

  /**
   * Pick-up: the program's signatures since the cursor, oldest first; every wallet a successful
   * instruction touched is re-read from the chain (subscribe clears a cancellation, cancel sets it).
   * The cursor moves only after the whole batch is applied, and applying a signature twice changes
   * nothing, so a crash or an RPC failure mid-batch is simply retried.
   */
  async pickUp(): Promise<number> {
    const programId = this.deps.chain.programId.toBase58();
    const cursor = await this.deps.db.selectFrom('cursors').select(['signature']).where('name', '=', CURSOR).executeTakeFirst();
    const sigs: SignatureInfo[] = [];
    let before: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const list = await this.deps.chain.signatures(programId, { until: cursor?.signature, before, limit: 1000 });
      sigs.push(...list);
      if (list.length < 1000) break;
      before = list[list.length - 1]!.signature;
    }
    if (sigs.length === 0) return 0;

    type Seen = { last?: 'subscribe' | 'cancel'; kinds: Set<string>; signature: string };
    const touched = new Map<string, Seen>();
    for (const s of [...sigs].reverse()) {
      if (s.err !== null) continue;
      const tx = await this.deps.chain.transaction(s.signature);
      if (!tx || tx.err !== null) continue;
      for (const { ix, decoded } of programInstructions(tx, programId)) {
        if (!decoded) continue;
        const wallet = ownerOf(ix, decoded) ?? (await this.walletOfPda(ix.accounts[1]));
        if (!wallet) continue;
        const seen = touched.get(wallet) ?? { kinds: new Set<string>(), signature: s.signature };
        seen.kinds.add(decoded.name);
        seen.signature = s.signature;
        if (decoded.name === 'subscribe' || decoded.name === 'cancel') seen.last = decoded.name;
        touched.set(wallet, seen);
      }
    }
    for (const [wallet, seen] of touched) {
      const reason: ChangeReason =
        seen.last === 'cancel' ? 'cancelled' : seen.kinds.has('subscribe') ? 'picked_up' : seen.kinds.has('renew') ? 'renewed' : 'refreshed';
      // Cancelled or not is read from the wallet's history now, not taken from this batch: a cancel (or a subscribe)
      // that landed after the batch was listed must not be undone by an older instruction of it. The batch's
      // transactions are memoised, so the history costs one signature list per wallet.
      await this.deps.subs.sync(wallet, { reason, ...(seen.last === undefined ? { history: false } : {}), msgId: `pickup:${seen.signature}:${wallet}` });
    }
    const newest = sigs[0]!;
    await this.deps.db
      .insertInto('cursors')
      .values({ name: CURSOR, signature: newest.signature, slot: newest.slot })
      .onConflict((c) => c.column('name').doUpdateSet({ signature: newest.signature, slot: newest.slot, updated_at: new Date() }))
      .execute();
    if (touched.size) this.deps.log.info({ signatures: sigs.length, wallets: touched.size }, 'picked up subscription program transactions');
    return sigs.length;
  }

  private async walletOfPda(pda: string | undefined): Promise<string | undefined> {
    if (!pda) return undefined;
    const row = await this.deps.db.selectFrom('subscriptions').select('wallet_address').where('pda', '=', pda).executeTakeFirst();
    if (row) return row.wallet_address;
    try {
      const info = await this.deps.chain.connection.getAccountInfo(new PublicKey(pda), this.deps.chain.commitment);
      return info?.owner.equals(this.deps.chain.programId) ? decodeSubscription(info.data).owner.toBase58() : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * The keeper: every subscription active on chain whose expires_at has passed (chain time) gets a
   * renew, paid by the keeper. The program renews from the prepaid balance or deactivates; either
   * outcome is stored and announced.
   */
  async renewDue(): Promise<number> {
    const now = await this.deps.chain.now();
    const due = await this.deps.db
      .selectFrom('subscriptions')
      .select(['wallet_address'])
      .where('chain_active', '=', true)
      .where('expires_at', '<=', new Date(now))
      .orderBy('expires_at')
      .limit(50)
      .execute();
    if (due.length === 0) return 0;
    await this.fundKeeper();
    let renewed = 0;
    for (const { wallet_address: wallet } of due) {
      const r = await this.deps.chain.renew(this.deps.keeper, wallet);
      if ('signature' in r) {
        const row = await this.deps.subs.sync(wallet, { reason: 'renewed', history: false, msgId: `renew:${r.signature}` });
        const outcome = row?.chain_active ? 'renewed' : 'deactivated';
        this.deps.log.info({ wallet_address: wallet, tx_signature: r.signature, outcome, expires_at: row?.expires_at.toISOString() }, 'renewal sent');
        renewed++;
      } else if (r.programError === ProgramErrorCode.NotExpired || r.programError === ProgramErrorCode.SubscriptionInactive) {
        // Someone else renewed it, or the chain clock disagrees: our copy is stale.
        await this.deps.subs.sync(wallet, { reason: 'refreshed', history: false });
      } else {
        this.deps.log.warn({ wallet_address: wallet, err: r.err }, 'renewal refused by the chain');
      }
    }
    return renewed;
  }

  /**
   * Announces each subscription that ends within 3 days (chain time), once per expires_at: a renewal moves expires_at
   * and so arms the next warning. Marked only after the event is stored, so a failed publish is tried next round.
   */
  async warnExpiring(): Promise<number> {
    const now = await this.deps.chain.now();
    const rows = await this.deps.db
      .selectFrom('subscriptions')
      .selectAll()
      .where('chain_active', '=', true)
      .where('expires_at', '>', new Date(now))
      .where('expires_at', '<=', new Date(now + EXPIRING_WITHIN_MS))
      .where((eb) => eb.or([eb('expiry_warned_for', 'is', null), eb('expiry_warned_for', '!=', eb.ref('expires_at'))]))
      .limit(100)
      .execute();
    for (const row of rows) {
      const days_left = Math.max(0, Math.ceil((row.expires_at.getTime() - now) / 86_400_000));
      await this.deps.expiring(
        { ...this.deps.subs.view(row), user_id: row.user_id, days_left },
        `expiring:${row.wallet_address}:${row.expires_at.toISOString()}`,
      );
      await this.deps.db.updateTable('subscriptions').set({ expiry_warned_for: row.expires_at }).where('wallet_address', '=', row.wallet_address).execute();
    }
    return rows.length;
  }

  private async fundKeeper(): Promise<void> {
    const balance = await this.deps.chain.balance(this.deps.keeper.publicKey);
    if (balance >= KEEPER_MIN_LAMPORTS) return;
    if (!this.deps.airdrop || Date.now() - this.lastAirdropFailure < 10 * 60_000) {
      this.deps.log.warn({ keeper: this.deps.keeper.publicKey.toBase58(), balance }, 'keeper balance is low; fund it to keep renewing');
      return;
    }
    try {
      await this.deps.chain.airdrop(this.deps.keeper.publicKey, KEEPER_TOP_UP);
      this.deps.log.info({ keeper: this.deps.keeper.publicKey.toBase58() }, 'keeper funded by airdrop');
    } catch (err) {
      this.lastAirdropFailure = Date.now();
      this.deps.log.warn({ keeper: this.deps.keeper.publicKey.toBase58(), reason: (err as Error).message }, 'keeper airdrop failed; fund it to keep renewing');
    }
  }
}
