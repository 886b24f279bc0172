import { expect } from 'vitest';

// An instance's status history as a client reads it on the swarm, where the tests cannot reach NATS: GET
// /instance/events/{id} serves it from JetStream through the edge and a gateway.

export interface HistoryEvent {
  /** The JetStream sequence (global to the stream, so other instances' events fall between). */
  id: number;
  event: string;
  data: { status?: string; failure_reason?: string; seq?: number; generation?: number };
}

/**
 * The instance's events after `lastEventId` (0: from the start of the stream), read to its deletion: the stream
 * ends there. Only for a deleted instance (a live one's stream stays open).
 */
export async function instanceHistory(apiBase: string, token: string, id: string, lastEventId = 0): Promise<HistoryEvent[]> {
  const res = await fetch(`${apiBase}/instance/events/${id}`, {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'last-event-id': String(lastEventId) },
    signal: AbortSignal.timeout(120_000),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`events of ${id}: ${res.status} ${text}`);
  const out: HistoryEvent[] = [];
  for (const block of text.split('\n\n')) {
    const ev: Partial<HistoryEvent> = {};
    for (const line of block.split('\n')) {
      if (line.startsWith('id: ')) ev.id = Number(line.slice(4));
      else if (line.startsWith('event: ')) ev.event = line.slice(7);
      else if (line.startsWith('data: ')) ev.data = JSON.parse(line.slice(6));
    }
    if (ev.data !== undefined) out.push(ev as HistoryEvent);
  }
  return out;
}

/**
 * A complete history: it starts at provisioning, ends with the deletion (once), every event is a change from
 * the one before (none lost between two alike, none replayed), the stream and outbox sequences only grow, and
 * `observed` (the statuses the API answered, in order, each with its failure reason) appears in it in order.
 */
export function expectComplete(id: string, h: HistoryEvent[], observed: Array<{ status: string; failure_reason?: string }>): void {
  const trail = h.map((e) => (e.event === 'deleted' ? 'deleted' : `${e.data.status}${e.data.failure_reason ? `(${e.data.failure_reason})` : ''}`)).join(' → ');
  expect(h[0]?.data.status, `${id}: ${trail}`).toBe('provisioning');
  expect(h.at(-1)?.event, `${id}: ${trail}`).toBe('deleted');
  expect(
    h.filter((e) => e.event === 'deleted'),
    `${id}: ${trail}`,
  ).toHaveLength(1);
  const statuses = h.filter((e) => e.event === 'status');
  for (let i = 1; i < h.length; i++) expect(h[i]!.id, `${id}: stream sequence`).toBeGreaterThan(h[i - 1]!.id);
  for (let i = 1; i < statuses.length; i++) {
    const [a, b] = [statuses[i - 1]!.data, statuses[i]!.data];
    expect(b.seq!, `${id}: outbox sequence`).toBeGreaterThan(a.seq!);
    expect(`${b.status}/${b.failure_reason}/${b.generation}`, `${id}: a repeated event in ${trail}`).not.toBe(
      `${a.status}/${a.failure_reason}/${a.generation}`,
    );
  }
  let at = 0;
  for (const o of observed) {
    while (
      at < statuses.length &&
      !(statuses[at]!.data.status === o.status && (o.failure_reason === undefined || statuses[at]!.data.failure_reason === o.failure_reason))
    )
      at++;
    expect(at, `${id}: ${o.status}${o.failure_reason ? ` (${o.failure_reason})` : ''} seen through the API is missing from ${trail}`).toBeLessThan(
      statuses.length,
    );
    at++;
  }
}
