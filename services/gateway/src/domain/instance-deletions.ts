import { sql, type Kysely } from 'kysely';
import { contracts } from '@agenthost/shared';
import type { GatewayDB } from '../db/schema.ts';
import type { StreamReader } from './stream-reader.ts';

const DELETED = contracts.provisioner.instanceDeleted.subject;

/** Rows are dropped a day after the stream has dropped their events (its max_age is 14 days). */
const KEEP_DAYS = 15;

/**
 * The instance deletions the event stream holds, kept in the gateway's Postgres by instance id with their stream
 * sequence. The deletion's subject does not carry the instance id, so the stream alone can only answer "was this
 * instance deleted after event N" by reading every deletion since N; here each deletion is read from the stream once
 * per replica (the first question after it was published reads it), and every question after costs one read of the
 * stream (nothing new: its end) and one row by key, however many deletions the stream holds.
 */
export class InstanceDeletions {
  /** The last stream sequence read on this replica (undefined: not yet taken from the table). */
  private cursor: number | undefined;
  private reading: Promise<void> | undefined;
  private again: Promise<void> | undefined;
  private prunedAt = 0;
  private readonly db: Kysely<GatewayDB>;
  private readonly reader: StreamReader;

  constructor(db: Kysely<GatewayDB>, reader: StreamReader) {
    this.db = db;
    this.reader = reader;
  }

  /** The deletion of this instance, if the stream holds one: whose instance it was, the event's sequence and time. */
  async find(instanceId: string): Promise<{ user_id: string; seq: number; deleted_at: Date } | undefined> {
    await this.catchUp();
    const row = await this.db
      .selectFrom('instance_deletions')
      .select(['user_id', 'seq', 'deleted_at'])
      .where('instance_id', '=', instanceId)
      .executeTakeFirst();
    return row && { user_id: row.user_id, seq: Number(row.seq), deleted_at: new Date(row.deleted_at) };
  }

  /**
   * Reads the deletions published since the last one read. One read at a time per replica: questions asked during a
   * read wait for one more read after it (which sees what was published meanwhile), not one each.
   */
  private catchUp(): Promise<void> {
    if (this.reading) {
      this.again ??= this.reading.then(
        () => this.catchUp(),
        () => this.catchUp(),
      );
      return this.again;
    }
    this.again = undefined;
    this.reading = this.read().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async read(): Promise<void> {
    if (this.cursor === undefined) {
      const r = await sql<{ seq: string | null }>`select max(seq) as seq from instance_deletions`.execute(this.db);
      this.cursor = Number(r.rows[0]?.seq ?? 0);
    }
    for (let ev = await this.reader.next(this.cursor + 1, DELETED); ev; ev = await this.reader.next(ev.seq + 1, DELETED)) {
      const p = contracts.provisioner.instanceDeleted.payload.safeParse(ev.data);
      if (p.success) {
        await this.db
          .insertInto('instance_deletions')
          .values({ instance_id: p.data.instance_id, user_id: p.data.user_id, seq: ev.seq, deleted_at: new Date(p.data.deleted_at) })
          .onConflict((c) => c.column('instance_id').doNothing())
          .execute();
      }
      this.cursor = ev.seq;
    }
    if (Date.now() - this.prunedAt > 3600_000) {
      this.prunedAt = Date.now();
      await sql`delete from instance_deletions where deleted_at < now() - make_interval(days => ${KEEP_DAYS})`.execute(this.db);
    }
  }
}
