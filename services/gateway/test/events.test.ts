import { setTimeout as sleep } from 'node:timers/promises';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storedEvents, type Session, type Stack, instanceStack } from '@agenthost/testkit';
import { openEvents, type SseEvent } from './sse-client.ts';

// GET /instance/events/{id}: the instance's lifecycle events from JetStream as server-sent events, resumable.

let sys: Awaited<ReturnType<typeof instanceStack>>;
let stack: Stack;
let nc: NatsConnection;
let alice: Session;
let bob: Session;

beforeAll(async () => {
  // WEBHOOKS off: the slow-reader test measures the event stream alone; webhooks' consumers read the same 128 MB.
  // A young generation held small (4 MB semi-spaces; V8 grows them to 32 MB under a load like that test's): the
  // garbage of the events the gateway hears then stays out of the RSS that test bounds.
  sys = await instanceStack('events', [18960, 18969], { SSE_HEARTBEAT_SECONDS: '1', WEBHOOKS: 'off', NODE_OPTIONS: '--max-semi-space-size=4' });
  stack = sys.stack;
  nc = await stack.nats.connect();
  alice = await sys.subscriber();
  bob = await sys.subscriber();
}, 240_000);

afterAll(async () => {
  await nc?.drain();
  await sys?.stop();
});

const url = (id: string) => `${stack.baseUrl}/instance/events/${id}`;
const waitFor = async (s: Session, id: string, state: string) => expect((await s.api.get(`/instance/wait/${id}?state=${state}&timeout=60`)).status).toBe(200);

/** What JetStream holds for the instance after a sequence, as the stream should have carried it. */
async function heldAfter(id: string, after: number) {
  const all = await storedEvents<Record<string, unknown>>(nc, 'events.instance.>');
  return all
    .filter((e) => e.seq > after && e.data.instance_id === id && (e.subject === 'events.instance.status' || e.subject === 'events.instance.deleted'))
    .map((e) => ({ id: String(e.seq), event: e.subject === 'events.instance.status' ? 'status' : 'deleted', data: e.data }));
}

describe('GET /instance/events', () => {
  it('loses no event across a disconnect and a resume with Last-Event-ID, against what JetStream holds', async () => {
    const c = await alice.api.post('/instance/create', { framework: 'openclaw' });
    const id = c.body.instance_id as string;
    const first = await openEvents(url(id), alice.token);
    expect(first.status).toBe(200);
    expect(first.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const current = await first.until((e) => e.event === 'current');
    expect(current.data).toMatchObject({ instance_id: id });
    await first.until((e) => e.event === 'status' && e.data.status === 'running');
    await alice.api.post(`/instance/stop/${id}`);
    await first.until((e) => e.event === 'status' && e.data.status === 'stopped');
    await first.close();
    const lastSeen = first.events.at(-1)!.id!;

    // While nobody listens: a start (provisioning → running) and a stop.
    await alice.api.post(`/instance/start/${id}`);
    await waitFor(alice, id, 'running');
    await alice.api.post(`/instance/stop/${id}`);
    await waitFor(alice, id, 'stopped');

    const resumed = await openEvents(url(id), alice.token, { lastEventId: lastSeen });
    expect(resumed.status).toBe(200);
    await resumed.until((e) => e.event === 'status' && e.data.status === 'stopped');
    expect(resumed.events.some((e) => e.event === 'current')).toBe(false);
    await alice.api.del(`/instance/delete/${id}`);
    await resumed.until((e) => e.event === 'deleted');
    await resumed.done; // the stream ends after the deletion

    const received: SseEvent[] = [...first.events, ...resumed.events].filter((e) => e.event !== 'current');
    const held = await heldAfter(id, Number(current.id));
    expect(received.map((e) => ({ id: e.id, event: e.event, data: e.data }))).toEqual(held);
    expect(new Set(received.map((e) => e.id)).size).toBe(received.length);
    console.log(
      `[events] ${received.length} events over two connections, ${first.events.length - 1} before the disconnect; ids ${received.map((e) => e.id).join(',')}`,
    );

    // A resume after the deletion still reads up to it, though the instance is gone.
    const late = await openEvents(url(id), alice.token, { lastEventId: lastSeen });
    expect(late.status).toBe(200);
    await late.done;
    expect(late.events.at(-1)).toMatchObject({ event: 'deleted', data: { instance_id: id } });
    // A client that got the deletion and reconnects with its id (its connection dropped as the stream ended) gets no
    // second deletion: 404, the instance is gone and nothing follows.
    const again = await openEvents(url(id), alice.token, { lastEventId: late.events.at(-1)!.id! });
    expect(again.status).toBe(404);
    expect(again.events.filter((e) => e.event === 'deleted')).toEqual([]);
    // Another user resuming the same stream gets 404, as for a fresh one.
    expect((await openEvents(url(id), bob.token, { lastEventId: lastSeen })).status).toBe(404);
  });

  it("sends heartbeats, answers 404 for another user's instance, and 400 for a bad Last-Event-ID", async () => {
    const c = await bob.api.post('/instance/create', { framework: 'openclaw' });
    const id = c.body.instance_id as string;
    const s = await openEvents(url(id), bob.token);
    await s.until((e) => e.event === 'status' && e.data.status === 'running');
    const before = s.heartbeats;
    await sleep(2500); // SSE_HEARTBEAT_SECONDS=1 in this suite
    expect(s.heartbeats).toBeGreaterThan(before);
    await s.close();

    const other = await openEvents(url(id), alice.token);
    expect(other.status).toBe(404);
    expect(await other.res.json()).toEqual({ error: 'Instance not found', code: 'INSTANCE_NOT_FOUND', status: 404 });
    const bad = await alice.api.get(`/instance/events/${id}`, { 'last-event-id': 'abc' });
    expect(bad.status).toBe(400);
    const badOwn = await bob.api.get(`/instance/events/${id}`, { 'last-event-id': '-1' });
    expect(badOwn.body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    await bob.api.del(`/instance/delete/${id}`);
  });

  it('a reader that stops reading holds the gateway to one event: its memory stays flat while the events wait in JetStream', async () => {
    const c = await bob.api.post('/instance/create', { framework: 'openclaw' });
    const id = c.body.instance_id as string;
    await bob.api.get(`/instance/wait/${id}?state=running&timeout=60`);
    const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${stack.gateways[0]!.pid()}/status`, 'utf8'))![1]) / 1024;
    // A client that takes the headers and then reads nothing (its socket fills up and the gateway's writes stall).
    const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
      http.get(url(id), { headers: { authorization: `Bearer ${bob.token}` } }, resolve).on('error', reject),
    );
    expect(res.statusCode).toBe(200);
    res.pause();
    const before = rssMb();
    // 128 MB of this instance's events, published as the provisioner would (the test's bus user may publish anything):
    // the bytes that wait are what the test is about; fewer, larger events (16 kB) keep it quick on a busy host.
    const N = 8_000;
    const pad = 'x'.repeat(16_000);
    const js = nc.jetstream();
    for (let i = 0; i < N; i += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, N - i) }, (_, j) =>
          js.publish(
            'events.instance.status',
            JSON.stringify({
              instance_id: id,
              user_id: bob.user_id,
              status: 'failed',
              at: new Date().toISOString(),
              failure_reason: `${i + j} ${pad}`,
              generation: 99,
              seq: i + j,
            }),
            // The server stores and replicates 128 MB meanwhile on a busy host: an ack may take longer than 5 s.
            { timeout: 60_000 },
          ),
        ),
      );
    }
    let peak = 0;
    for (let i = 0; i < 6; i++) {
      await sleep(500);
      peak = Math.max(peak, rssMb());
    }
    console.log(`[events] slow reader: gateway RSS ${before.toFixed(0)} MB before, peak ${peak.toFixed(0)} MB with ${(N * 16) / 1000} MB of events unread`);
    // RSS counts the garbage of the events the gateway heard meanwhile (its wake-ups) and read until the socket filled,
    // so the bound is loose: half of what waits unread, which buffering in the gateway would exceed.
    expect(peak - before).toBeLessThan(64);

    // Reading again, the client gets every event, in order, none dropped.
    let got = 0;
    let last = -1;
    let buf = '';
    await new Promise<void>((resolve, reject) => {
      res.on('data', (chunk: Buffer) => {
        buf += chunk.toString('utf8');
        for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
          const m = /data: (\{.*"generation":99.*\})/.exec(buf.slice(0, i));
          buf = buf.slice(i + 2);
          if (!m) continue;
          const n = Number((JSON.parse(m[1]!) as { failure_reason: string }).failure_reason.split(' ')[0]);
          if (n !== last + 1) return reject(new Error(`event ${n} after ${last}`));
          last = n;
          if (++got === N) resolve();
        }
      });
      res.resume();
    });
    expect(got).toBe(N);
    res.destroy();
    await bob.api.del(`/instance/delete/${id}`);
  }, 180_000);
});
