import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely, type Selectable } from 'kysely';
import { backoffMs, toAppError, webhookSignatures, type Logger } from '@agenthost/shared';
import type { GatewayDB } from '../../db/schema.ts';
import { openSecret } from './secrets.ts';
import { send, type Attempt } from './sender.ts';
import { resolveTarget, type Lookup } from './target.ts';

export type Claimed = Selectable<GatewayDB['webhook_deliveries']>;

export interface WorkerSettings {
  log: Logger;
  key: Buffer | undefined;
  allowHosts: readonly string[];
  ca: string[];
  timeoutMs: number;
  retryBaseMs: number;
  pollMs: number;
  lookup?: Lookup;
}

/** Longest wait between two attempts. */
const MAX_BACKOFF_MS = 3600_000;
const BATCH = 10;

/**
 * Sends due deliveries. Every replica runs one; a delivery is claimed by moving its next_attempt_at past the attempt's
 * timeout (rows locked with SKIP LOCKED), so two replicas never send the same attempt, and a replica that dies
 * mid-attempt leaves the delivery to be tried again once the claim lapses.
 */
export class DeliveryWorker {
  private stopped = false;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private loop: Promise<void> | undefined;
  /** Ends the attempts in flight at stop: their claims lapse and another replica (or this one restarted) sends them. */
  private readonly halt = new AbortController();

  private readonly db: Kysely<GatewayDB>;
  private readonly settings: WorkerSettings;

  constructor(db: Kysely<GatewayDB>, settings: WorkerSettings) {
    this.db = db;
    this.settings = settings;
  }

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.halt.abort();
    this.wake();
    await this.loop;
  }

  /** New or redelivered rows: look now rather than at the next poll. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      this.woken = false;
      let claimed: Claimed[] = [];
      try {
        claimed = await this.claim();
        await Promise.all(claimed.map((d) => this.attempt(d)));
      } catch (err) {
        this.settings.log.warn({ err }, 'webhook delivery round failed; will retry');
      }
      if (claimed.length === BATCH || this.woken || this.stopped) continue;
      const ac = new AbortController();
      this.wakeUp = () => ac.abort();
      await sleep(this.settings.pollMs, undefined, { signal: ac.signal }).catch(() => {});
      this.wakeUp = undefined;
    }
  }

  /** How long a claim holds a delivery: past the attempt's timeout, so no other replica sends it meanwhile. */
  get leaseSeconds(): number {
    return Math.ceil(this.settings.timeoutMs / 1000) + 30;
  }

  /** One attempt of a delivery claimed by its caller (a test event), recorded as any attempt is. */
  deliver(d: Claimed): Promise<void> {
    return this.attempt(d);
  }

  private async claim(): Promise<Claimed[]> {
    const lease = `${this.leaseSeconds} seconds`;
    const r = await sql<Claimed>`
      update webhook_deliveries set next_attempt_at = now() + ${lease}::interval, attempts = attempts + 1
      where id in (
        select id from webhook_deliveries where status = 'pending' and next_attempt_at <= now()
        order by next_attempt_at limit ${BATCH} for update skip locked)
      returning *`.execute(this.db);
    return r.rows;
  }

  private async attempt(d: Claimed): Promise<void> {
    const endpoint = await this.db.selectFrom('webhook_endpoints').selectAll().where('id', '=', d.webhook_id).executeTakeFirst();
    if (!endpoint) return; // deleted meanwhile: its deliveries went with it
    let result: Attempt;
    try {
      // Checked again at each attempt: the name may resolve to another address than at create.
      const target = await resolveTarget(endpoint.url, this.settings.allowHosts, this.settings.lookup);
      const secrets = [openSecret(this.settings.key!, endpoint.secret_sealed, endpoint.id)];
      if (endpoint.previous_secret_sealed && endpoint.previous_expires_at && endpoint.previous_expires_at.getTime() > Date.now()) {
        secrets.push(openSecret(this.settings.key!, endpoint.previous_secret_sealed, endpoint.id));
      }
      const at = new Date();
      result = await send(target, d.id, d.payload, webhookSignatures(secrets, d.id, at, d.payload), at, {
        ca: this.settings.ca,
        timeoutMs: this.settings.timeoutMs,
        signal: this.halt.signal,
      });
    } catch (err) {
      const e = toAppError(err);
      result = { error: e.code === 'WEBHOOK_URL_REFUSED' ? e.message : 'could not send' };
      if (e.code !== 'WEBHOOK_URL_REFUSED')
        this.settings.log.warn({ err, webhook_id: d.webhook_id, delivery_id: d.id }, 'webhook attempt failed before sending');
    }
    // Stopped mid-attempt: nothing is recorded, so the claim lapses and the attempt is made again.
    if (this.halt.signal.aborted) return;
    await this.record(d, result);
  }

  private async record(d: Claimed, r: Attempt): Promise<void> {
    const ok = r.status !== undefined && r.status >= 200 && r.status < 300;
    const now = Date.now();
    const backoff = backoffMs(d.attempts, { initialMs: this.settings.retryBaseMs, maxMs: MAX_BACKOFF_MS });
    const next = now + backoff;
    const gaveUp = !ok && next > d.give_up_at.getTime();
    await this.db
      .updateTable('webhook_deliveries')
      .set({
        status: ok ? 'delivered' : gaveUp ? 'failed' : 'pending',
        last_status_code: r.status ?? null,
        last_error: r.error ?? null,
        next_attempt_at: ok || gaveUp ? null : new Date(next),
        delivered_at: ok ? new Date(now) : null,
      })
      .where('id', '=', d.id)
      .execute();
    this.settings.log.info(
      {
        event: 'webhook_attempt',
        webhook_id: d.webhook_id,
        delivery_id: d.id,
        attempt: d.attempts,
        status: r.status,
        error: r.error,
        outcome: ok ? 'delivered' : gaveUp ? 'failed' : 'retry',
      },
      'webhook attempt',
    );
  }
}
