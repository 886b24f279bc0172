import type { NatsConnection } from 'nats';
import { EVENT_STREAM } from '@agenthost/shared';

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
    const reply = await this.nc.request(API, JSON.stringify({ seq: Math.max(1, from), next_by_subj: subject }), { timeout: this.timeoutMs });
    const body = reply.json<{ message?: { seq: number; subject: string; data?: string }; error?: { code: number; description: string } }>();
    if (body.error?.code === 404) return undefined;
    if (!body.message) throw new Error(`reading ${subject} from ${EVENT_STREAM}: ${body.error?.description ?? 'no message'}`);
    let data: Record<string, unknown> = {};
    try {
      data = JSON.parse(Buffer.from(body.message.data ?? '', 'base64').toString('utf8')) as Record<string, unknown>;
    } catch {
      /* an event that is not JSON: its sequence still moves the reader on */
    }
    return { seq: body.message.seq, subject: body.message.subject, data };
  }

  /** The stream's last sequence now (0 when empty): a new client stream starts after it. */
  async lastSeq(): Promise<number> {
    const reply = await this.nc.request(`$JS.API.STREAM.INFO.${EVENT_STREAM}`, '', { timeout: this.timeoutMs });
    const body = reply.json<{ state?: { last_seq: number }; error?: { description: string } }>();
    if (!body.state) throw new Error(`stream info of ${EVENT_STREAM}: ${body.error?.description ?? 'no state'}`);
    return body.state.last_seq;
  }
}
