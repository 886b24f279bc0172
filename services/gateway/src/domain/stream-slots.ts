import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { AppError, type Logger } from '@agenthost/shared';
import type { GatewayDB } from '../db/schema.ts';

/** What a stream is: its per-instance cap counts streams of the same kind only (a user's event streams never crowd out the instance's own key watch). */
export type StreamKind = 'events' | 'logs' | 'keys';

/** Whose stream: key watches have no user (the instance authenticates itself), so only the per-instance cap holds them. */
export interface StreamOwner {
  kind: StreamKind;
  instance_id: string;
  user_id?: string;
}

/**
 * A row outlives its replica by at most this long: every replica renews the rows of its open streams every third of it,
 * so one that died (no release, no renewal) stops holding its users' slots within 30 s.
 */
const TTL_SECONDS = 30;

/**
 * A client over a cap waits for one of its own streams to end, which the gateway cannot foresee (the user closes a tab,
 * or a stream reaches STREAM_MAX_SECONDS): 10 s keeps a client that retries by itself cheap.
 */
const RETRY_AFTER_SECONDS = 10;

/**
 * The caps on long-lived streams (STREAMS_PER_USER, STREAMS_PER_INSTANCE), counted in the gateway's Postgres so they
 * hold across replicas: one row per open stream. A take locks the user (and the instance) for its transaction, counts
 * the live rows and adds one only under both caps, so concurrent opens on several replicas cannot pass a cap together.
 * It costs two statements per stream (take, release), nothing per event.
 */
export class StreamSlots {
  private readonly replicaId = randomUUID();
  /** This replica's open streams: only these are renewed (a row whose release failed expires on its own). */
  private readonly held = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private readonly db: Kysely<GatewayDB>;
  private readonly limits: { perUser: number; perInstance: number };
  private readonly log: Logger;

  constructor(db: Kysely<GatewayDB>, limits: { perUser: number; perInstance: number }, log: Logger) {
    this.db = db;
    this.limits = limits;
    this.log = log;
  }

  start(): void {
    this.timer = setInterval(() => void this.renew(), (TTL_SECONDS * 1000) / 3);
    // Nothing to renew keeps the process alive: at exit the rows expire by themselves.
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Takes a slot for one stream, or throws 429 RATE_LIMITED (Retry-After) over a cap; returns its release. */
  async take(owner: StreamOwner): Promise<() => void> {
    const id = randomUUID();
    const { perUser, perInstance } = this.limits;
    const user = owner.user_id ?? null;
    let refused: 'user' | 'instance' | undefined;
    try {
      refused = await this.db.transaction().execute(async (trx) => {
        // The user first, then the instance: every take locks in this order, so two never wait on each other.
        if (user) await sql`select pg_advisory_xact_lock(hashtext(${`stream-slots:user:${user}`}))`.execute(trx);
        await sql`select pg_advisory_xact_lock(hashtext(${`stream-slots:instance:${owner.instance_id}`}))`.execute(trx);
        const r = await sql<{ by_user: string; by_instance: string }>`
          select (select count(*) from stream_slots where ${user}::uuid is not null and user_id = ${user}::uuid and expires_at > now()) as by_user,
                 (select count(*) from stream_slots where instance_id = ${owner.instance_id} and kind = ${owner.kind} and expires_at > now()) as by_instance
        `.execute(trx);
        const counts = r.rows[0]!;
        if (user && Number(counts.by_user) >= perUser) return 'user';
        if (Number(counts.by_instance) >= perInstance) return 'instance';
        await sql`
          insert into stream_slots (id, replica_id, user_id, instance_id, kind, expires_at)
          values (${id}, ${this.replicaId}, ${user}, ${owner.instance_id}, ${owner.kind}, now() + make_interval(secs => ${TTL_SECONDS}))
        `.execute(trx);
        return undefined;
      });
    } catch (err) {
      throw new AppError('SERVICE_UNAVAILABLE', 'Open streams cannot be counted; retry shortly', { retryable: true, retryAfter: 1, cause: err });
    }
    if (refused) {
      const what = refused === 'user' ? `${perUser} open streams per user` : `${perInstance} open ${owner.kind} streams per instance`;
      throw new AppError('RATE_LIMITED', `Too many open streams (at most ${what}); close one and retry`, { retryAfter: RETRY_AFTER_SECONDS });
    }
    this.held.add(id);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held.delete(id);
      void sql`delete from stream_slots where id = ${id}`
        .execute(this.db)
        .catch((err: unknown) => this.log.warn({ err }, 'could not release a stream slot; it expires by itself'));
    };
  }

  /** Keeps this replica's rows alive, and sweeps rows long expired (replicas that died). */
  private async renew(): Promise<void> {
    try {
      if (this.held.size > 0)
        await sql`update stream_slots set expires_at = now() + make_interval(secs => ${TTL_SECONDS}) where id = any(${[...this.held]}::uuid[])`.execute(
          this.db,
        );
      await sql`delete from stream_slots where expires_at < now() - make_interval(secs => ${TTL_SECONDS})`.execute(this.db);
    } catch (err) {
      this.log.warn({ err }, 'could not renew the open stream slots');
    }
  }
}
