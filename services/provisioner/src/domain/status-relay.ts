import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Logger } from '@agenthost/shared';
import type { ProvisionerDB, StatusEventsTable } from '../db/schema.ts';
import { singleFlight } from './single-flight.ts';

export type StatusEvent = Selectable<StatusEventsTable>;

const BATCH = 200;
/** A missed notification (a reconnect, a replica that was busy) is picked up by this poll. */
const POLL_MS = 2_000;

/**
 * Publishes the status outbox (status_events, filled by a trigger on instances) to JetStream in order, then
 * deletes what was published. One replica relays at a time (a transaction advisory lock per schema), so the
 * events of an instance keep their order; a failed publish rolls back and is tried again, and JetStream
 * de-duplicates the retry by the event's sequence number. Woken by LISTEN/NOTIFY, so an event is on the stream
 * a few milliseconds after the change commits.
 */
export class StatusRelay {
  private readonly deps: { db: Kysely<ProvisionerDB>; databaseUrl: string; schema: string; publish: (e: StatusEvent) => Promise<void>; log: Logger };
  private listener: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(deps: StatusRelay['deps']) {
    this.deps = deps;
  }

  readonly trigger = singleFlight(
    () => this.drain(),
    (err) => {
      this.deps.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'status events not published yet; will retry');
      return 0;
    },
  );

  start(): void {
    this.timer = setInterval(() => void this.trigger(), POLL_MS);
    this.timer.unref();
    void this.listen();
    void this.trigger();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.listener?.end().catch(() => {});
  }

  /** Publishes everything in the outbox; resolves with the number of events published. */
  private async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.batch();
      total += n;
      if (n < BATCH) return total;
    }
  }

  private batch(): Promise<number> {
    return this.deps.db.transaction().execute(async (trx) => {
      const lock = await sql<{ ok: boolean }>`select pg_try_advisory_xact_lock(hashtext(current_schema() || ':status-relay')) as ok`.execute(trx);
      if (!lock.rows[0]?.ok) return 0; // another replica is relaying; it will see these too
      const rows = await trx.selectFrom('status_events').selectAll().orderBy('seq').limit(BATCH).execute();
      for (const row of rows) await this.deps.publish(row);
      if (rows.length) await trx.deleteFrom('status_events').where('seq', '<=', rows.at(-1)!.seq).execute();
      return rows.length;
    });
  }

  /** A connection of its own that LISTENs; made again after a loss (the poll covers the gap). */
  private async listen(): Promise<void> {
    while (!this.stopped) {
      const client = new pg.Client({ connectionString: this.deps.databaseUrl, connectionTimeoutMillis: 5000 });
      const lost = new Promise<void>((resolve) => {
        client.on('error', () => resolve());
        client.on('end', () => resolve());
      });
      try {
        await client.connect();
        await client.query('listen instance_status_events');
        client.on('notification', () => void this.trigger());
        this.listener = client;
        await lost;
      } catch {
        // Postgres unreachable: the poll keeps trying to publish; listen again in a moment.
      }
      await client.end().catch(() => {});
      if (!this.stopped) await sleep(POLL_MS);
    }
  }
}

/** The events.instance.status message of an outbox row: the crash fields only when there was a crash, the upgrade's when it moved. */
export function statusMessage(e: StatusEvent) {
  return {
    instance_id: e.instance_id,
    user_id: e.user_id,
    status: e.status,
    at: e.at.toISOString(),
    generation: e.generation,
    seq: e.seq,
    ...(e.failure_reason ? { failure_reason: e.failure_reason } : {}),
    ...(e.restarts || e.exit_reason ? { restarts: e.restarts } : {}),
    ...(e.exit_reason ? { exit_reason: e.exit_reason } : {}),
    ...(e.exit_kind ? { exit_kind: e.exit_kind } : {}),
    ...(e.next_restart_at ? { next_restart_at: new Date(e.next_restart_at).toISOString() } : {}),
    ...(e.upgrade ? { upgrade: e.upgrade } : {}),
    ...(e.upgrade_reason ? { upgrade_reason: e.upgrade_reason } : {}),
    ...(e.sleep_depth ? { sleep_depth: e.sleep_depth } : {}),
    ...(e.wake_warning ? { wake_warning: e.wake_warning } : {}),
  };
}
