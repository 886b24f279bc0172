import type { NatsConnection } from 'nats';

/**
 * Every event stored on the EVENTS stream under a subject, oldest first: what a late subscriber replaying the
 * stream would see. Read with the stream's message-get API (next message on the subject from a sequence), which
 * leaves no consumer behind.
 */
export async function eventHistory<T = Record<string, unknown>>(nc: NatsConnection, subject: string): Promise<T[]> {
  return (await storedEvents<T>(nc, subject)).map((e) => e.data);
}

/** As eventHistory, with each event's stream sequence and subject (`subject` may have wildcards). */
export async function storedEvents<T = Record<string, unknown>>(
  nc: NatsConnection,
  subject: string,
): Promise<Array<{ seq: number; subject: string; data: T }>> {
  const out: Array<{ seq: number; subject: string; data: T }> = [];
  for (let seq = 1; ; ) {
    const reply = await nc.request('$JS.API.STREAM.MSG.GET.EVENTS', JSON.stringify({ seq, next_by_subj: subject }), { timeout: 5000 });
    const body = reply.json<{ message?: { seq: number; subject: string; data?: string }; error?: { code: number; description: string } }>();
    if (body.error?.code === 404) return out;
    if (!body.message) throw new Error(`reading ${subject} from EVENTS: ${body.error?.description ?? 'no message'}`);
    out.push({ seq: body.message.seq, subject: body.message.subject, data: JSON.parse(Buffer.from(body.message.data ?? '', 'base64').toString('utf8')) as T });
    seq = body.message.seq + 1;
  }
}
