import { type NatsConnection, RequestStrategy } from 'nats';
import { AppError, EVENT_STREAM, observeSent } from '@agenthost/shared';

/** Every instance lifecycle event (status changes, deletions; created and backups too, skipped by the readers). */
export const INSTANCE_EVENTS = 'events.instance.>';

export interface StoredEvent {
  /** The JetStream stream sequence: the SSE event id. */
  seq: number;
  subject: string;
  data: Record<string, unknown>;
}

const API = `$JS.API.STREAM.MSG.GET.${EVENT_STREAM}`;

/**
 * Reads the event stream with its message-get API (the first message on a subject at or after a sequence): no
 * consumer is created, so a client stream costs the server nothing between reads, and the gateway's NATS user
 * needs read access to the stream only (it cannot pull from, or ack for, another service's durable consumer).
 */
export class StreamReader {
  private readonly nc: NatsConnection;
  private readonly timeoutMs: number;

  constructor(nc: NatsConnection, timeoutMs: number) {
    this.nc = nc;
    this.timeoutMs = timeoutMs;
  }

  /** The first event on `subject` with a sequence ≥ `from`, or undefined at the end of the stream. */
  async next(from: number, subject = INSTANCE_EVENTS): Promise<StoredEvent | undefined> {
    const body = await this.ask<{ message?: { seq: number; subject: string; data?: string }; error?: { code: number; description: string } }>(
      API,
      JSON.stringify({ seq: Math.max(1, from), next_by_subj: subject }),
    );
    if (body.error?.code === 404) return undefined;
    if (!body.message) throw unavailable(new Error(`reading ${subject} from ${EVENT_STREAM} at ${from}: ${JSON.stringify(body.error ?? 'no message')}`));
    let data: Record<string, unknown> = {};
    try {
      data = JSON.parse(Buffer.from(body.message.data ?? '', 'base64').toString('utf8')) as Record<string, unknown>;
    } catch {
      /* an event that is not JSON: its sequence still moves the reader on */
    }
    return { seq: body.message.seq, subject: body.message.subject, data };
  }

  /**
   * The stream's first and last sequence now (last 0 when empty): a new client stream starts after `last`, and a
   * resume from before `first - 1` has lost the events the stream dropped in between (max_age).
   */
  async bounds(): Promise<{ first: number; last: number }> {
    const body = await this.ask<{ state?: { first_seq: number; last_seq: number }; error?: { code: number; description: string } }>(
      `$JS.API.STREAM.INFO.${EVENT_STREAM}`,
      '',
    );
    if (!body.state) throw unavailable(new Error(`stream info of ${EVENT_STREAM}: ${JSON.stringify(body.error ?? 'no state')}`));
    return { first: body.state.first_seq, last: body.state.last_seq };
  }

  /**
   * One JetStream API call. Every server of a cluster hears it: the stream's leader answers, and a server that has
   * lost sight of the leader (a replica that came back and is not current yet) answers at once "temporarily
   * unavailable" (503, err_code 10008), usually first when it is the one this gateway is connected to. So the answers
   * are read for the whole timeout until one is not that; only if none is, that is the answer. A bus that does not
   * answer (or answers garbage) is a retryable 503, its cause logged.
   */
  private async ask<T extends { error?: { code: number } }>(subject: string, payload: string): Promise<T> {
    let stale: T | undefined;
    // Counted as nats/request.ts counts the gateway's other requests (agenthost_nats_client_requests_total).
    const started = performance.now();
    const seen = (outcome: string) => observeSent(subject, outcome, (performance.now() - started) / 1000);
    try {
      const answers = await this.nc.requestMany(subject, payload, { strategy: RequestStrategy.Timer, maxWait: this.timeoutMs });
      for await (const m of answers) {
        const body = m.json<T>();
        if (body.error?.code !== 503) {
          seen('OK');
          return body;
        }
        stale = body;
      }
    } catch (err) {
      seen('UNAVAILABLE');
      throw unavailable(err);
    }
    seen(stale ? 'OK' : 'UNAVAILABLE');
    if (stale) return stale;
    throw unavailable(new Error(`no answer to ${subject} within ${this.timeoutMs} ms`));
  }
}

/** The event stream could not be read: the client retries (the cause stays in the gateway's log). */
function unavailable(cause: unknown): AppError {
  return new AppError('SERVICE_UNAVAILABLE', 'The event stream could not be read; retry shortly', { retryable: true, retryAfter: 1, cause });
}
