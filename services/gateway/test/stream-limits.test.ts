import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayUrl, spawnService, storedEvents, type ServiceProcess, type Session, type Stack, gatewayEnv, instanceStack } from '@agenthost/testkit';
import { openEvents, type SseEvent } from './sse-client.ts';

// The long-lived streams (GET /instance/events, /instance/logs?follow=true) are bounded: a resume of an unknown
// instance costs one lookup, a Last-Event-ID older than the stream keeps is refused, each user and instance holds a
// capped number of streams across replicas, and a stream ends after its lifetime with nothing lost on the resume.

let sys: Awaited<ReturnType<typeof instanceStack>>;
let stack: Stack;
let nc: NatsConnection;
let alice: Session;
let a: string;
let b: string;
/** A gateway with a 2-second stream lifetime, on the same database (so the same caps). */
let shortLived: ServiceProcess;

beforeAll(async () => {
  sys = await instanceStack('stream-limits', [19473, 19479], { STREAMS_PER_USER: '4', STREAMS_PER_INSTANCE: '3', WEBHOOKS: 'off', SSE_HEARTBEAT_SECONDS: '1' });
  stack = sys.stack;
  nc = await stack.nats.connect();
  alice = await sys.subscriber();
  a = (await alice.api.post('/instance/create', { framework: 'openclaw' })).body.instance_id as string;
  b = (await alice.api.post('/instance/create', { framework: 'openclaw' })).body.instance_id as string;
  for (const id of [a, b]) expect((await alice.api.get(`/instance/wait/${id}?state=running&timeout=60`)).status).toBe(200);
}, 300_000);

afterAll(async () => {
  await shortLived?.stop();
  await nc?.drain();
  await sys?.stop();
});

const url = (id: string, base = stack.baseUrl) => `${base}/instance/events/${id}`;
const logsUrl = (id: string, base = stack.baseUrl) => `${base}/instance/logs/${id}?follow=true`;

describe('long-lived streams', () => {
  it('a resume of an unknown instance costs one lookup however many deletions the stream holds', async () => {
    // Every read of the deletions the gateway makes, as the bus carries it.
    let reads = 0;
    const sub = nc.subscribe('$JS.API.STREAM.MSG.GET.EVENTS', {
      callback: (_e, m) => {
        if ((JSON.parse(new TextDecoder().decode(m.data)) as { next_by_subj?: string }).next_by_subj === 'events.instance.deleted') reads++;
      },
    });
    // 150 deletions of other users' instances, as the provisioner publishes them.
    const js = nc.jetstream();
    for (let i = 0; i < 150; i++) {
      const payload = { instance_id: `gone-${randomUUID().slice(0, 8)}`, user_id: randomUUID(), deleted_at: new Date().toISOString() };
      await js.publish('events.instance.deleted', JSON.stringify(payload));
    }
    const resume = async () => {
      const s = await openEvents(url(`never-${randomUUID().slice(0, 8)}`), alice.token, { lastEventId: '1' });
      expect(s.status).toBe(404);
      expect(await s.res.json()).toEqual({ error: 'Instance not found', code: 'INSTANCE_NOT_FOUND', status: 404 });
    };
    await resume(); // the first question after the deletions reads each of them once
    const first = reads;
    reads = 0;
    await Promise.all([resume(), resume(), resume(), resume()]);
    await nc.flush();
    sub.unsubscribe();
    console.log(`[stream-limits] deletion reads: ${first} by the first resume after 150 deletions, ${reads} by the next 4`);
    expect(reads).toBeLessThanOrEqual(4);
  }, 120_000);

  it('refuses opening past the per-instance and per-user caps with 429, across replicas; earlier streams keep working; closing one frees a slot', async () => {
    const other = gatewayUrl(await stack.addReplica('gateway', 'gateway-streams-b'));
    const open: Awaited<ReturnType<typeof openEvents>>[] = [];
    for (const base of [stack.baseUrl, stack.baseUrl, other]) {
      const s = await openEvents(url(a, base), alice.token);
      expect(s.status).toBe(200);
      open.push(s);
    }
    // A fourth event stream of the same instance, on either replica: over STREAMS_PER_INSTANCE=3.
    const overInstance = await openEvents(url(a, other), alice.token);
    expect(overInstance.status).toBe(429);
    expect(overInstance.res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await overInstance.res.json()).toMatchObject({ code: 'RATE_LIMITED', status: 429, error: expect.stringMatching(/per instance/) });
    // Another instance: the user's fourth stream is allowed, the fifth (a log follow) is over STREAMS_PER_USER=4.
    const onB = await openEvents(url(b), alice.token);
    expect(onB.status).toBe(200);
    open.push(onB);
    const overUser = await openEvents(logsUrl(b, other), alice.token);
    expect(overUser.status).toBe(429);
    expect(await overUser.res.json()).toMatchObject({ code: 'RATE_LIMITED', status: 429, error: expect.stringMatching(/per user/) });

    // The streams already open still carry events.
    await alice.api.post(`/instance/stop/${a}`);
    for (const s of open.slice(0, 3)) await s.until((e) => e.event === 'status' && e.data.status === 'stopped');

    // Closing one frees its slot (the release follows the close: the next open may need a moment).
    await open.shift()!.close();
    let again: Awaited<ReturnType<typeof openEvents>> | undefined;
    for (let i = 0; i < 50 && again?.status !== 200; i++) {
      if (again) await sleep(100);
      again = await openEvents(url(a, other), alice.token);
    }
    expect(again!.status).toBe(200);
    open.push(again!);
    await Promise.all(open.map((s) => s.close()));

    // Log follows count per instance apart from event streams (once the closed streams' slots are freed).
    const logs: Awaited<ReturnType<typeof openEvents>>[] = [];
    for (let i = 0; i < 50 && logs.length < 3; i++) {
      const s = await openEvents(logsUrl(a, i % 2 ? other : stack.baseUrl), alice.token);
      if (s.status === 200) logs.push(s);
      else await sleep(100);
    }
    expect(logs).toHaveLength(3);
    const overLogs = await openEvents(logsUrl(a), alice.token);
    expect(overLogs.status).toBe(429);
    expect(await overLogs.res.json()).toMatchObject({ code: 'RATE_LIMITED', error: expect.stringMatching(/logs streams per instance/) });
    const events = await openEvents(url(a), alice.token);
    expect(events.status).toBe(200);
    await Promise.all([...logs, events].map((s) => s.close()));
  }, 120_000);

  it('a stream ends after its lifetime, and the resume with Last-Event-ID loses nothing', async () => {
    shortLived = await spawnService('gateway', {
      env: { ...stack.envFor('gateway'), ...gatewayEnv, GATEWAY_HOST: '127.0.0.1', GATEWAY_PORT: '0', WEBHOOKS: 'off', STREAM_MAX_SECONDS: '2' },
      label: 'gateway-streams-short',
    });
    const base = gatewayUrl(shortLived);
    // Slots of the previous test's streams may still be on their way out.
    let s = await openEvents(url(a, base), alice.token);
    for (let i = 0; i < 50 && s.status === 429; i++) {
      await sleep(100);
      s = await openEvents(url(a, base), alice.token);
    }
    expect(s.status).toBe(200);
    const current = await s.until((e) => e.event === 'current');
    // The lifetime ends the first connection before the start, so the start's events come while the client is away
    // (an instance running within one lifetime left a single connection and nothing to resume): the resume must
    // bring every one of them.
    await s.done;
    const received: SseEvent[] = s.events.filter((e) => e.event !== 'current');
    await alice.api.post(`/instance/start/${a}`);
    let connections = 1;
    while (!received.some((e) => e.data.status === 'running')) {
      s = await openEvents(url(a, base), alice.token, { lastEventId: received.at(-1)?.id ?? current.id! });
      expect(s.status).toBe(200);
      connections++;
      await s.done; // the lifetime ends it; the client reconnects from its last id
      received.push(...s.events.filter((e) => e.event !== 'current'));
    }
    const upTo = Number(received.find((e) => e.data.status === 'running')!.id);
    const held = (await storedEvents<Record<string, unknown>>(nc, 'events.instance.status'))
      .filter((e) => e.seq > Number(current.id) && e.seq <= upTo && e.data.instance_id === a)
      .map((e) => ({ id: String(e.seq), data: e.data }));
    console.log(`[stream-limits] ${received.length} events over ${connections} connections of a 2 s lifetime`);
    expect(connections).toBeGreaterThan(1);
    expect(received.filter((e) => Number(e.id) <= upTo).map((e) => ({ id: e.id, data: e.data }))).toEqual(held);
  }, 120_000);

  it('refuses a Last-Event-ID older than the stream keeps with 410, and resumes from the oldest it keeps', async () => {
    const jsm = await nc.jetstreamManager();
    const last = (await jsm.streams.info('EVENTS')).state.last_seq;
    // What max_age does after 14 days: the events before `last` are gone.
    await jsm.streams.purge('EVENTS', { seq: last });
    const old = await openEvents(url(b), alice.token, { lastEventId: String(last - 2) });
    expect(old.status).toBe(410);
    expect(await old.res.json()).toEqual({
      error: 'The events after this Last-Event-ID are no longer kept; reconnect without it for the current state',
      code: 'LAST_EVENT_ID_EXPIRED',
      status: 410,
    });
    const kept = await openEvents(url(b), alice.token, { lastEventId: String(last - 1) });
    expect(kept.status).toBe(200);
    await kept.close();
  });
});
