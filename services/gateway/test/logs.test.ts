import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Session, Stack } from '@agenthost/testkit';
import { docker, containerName, instanceStack } from '@agenthost/testkit';
import { openEvents, type SseEvent } from './sse-client.ts';

// GET /instance/logs/{id}?follow=true: the container's output as server-sent events, resumable by Last-Event-ID.

let sys: Awaited<ReturnType<typeof instanceStack>>;
let stack: Stack;
let alice: Session;
let bob: Session;
let id: string;

beforeAll(async () => {
  sys = await instanceStack('logs', [19400, 19409], { SSE_HEARTBEAT_SECONDS: '1' });
  stack = sys.stack;
  alice = await sys.subscriber();
  bob = await sys.subscriber();
  id = (await alice.api.post('/instance/create', { framework: 'openclaw' })).body.instance_id as string;
  expect((await alice.api.get(`/instance/wait/${id}?state=running&timeout=60`)).status).toBe(200);
}, 240_000);

afterAll(async () => {
  await sys?.stop();
});

const url = (query = 'follow=true') => `${stack.baseUrl}/instance/logs/${id}?${query}`;

/** Lines written to the agent's stdout from inside its container, as the agent would print them (one write for all). */
const print = (lines: string[]) => docker('exec', containerName(id), 'sh', '-c', `printf '%s\\n' ${lines.map((l) => `'${l}'`).join(' ')} > /proc/1/fd/1`);

const texts = (events: SseEvent[], prefix: string) =>
  events.filter((e) => e.event === 'line' && String(e.data.text).startsWith(prefix)).map((e) => e.data.text as string);

describe('GET /instance/logs?follow=true', () => {
  it('carries lines written after the stream opened, and heartbeats', async () => {
    const s = await openEvents(url('follow=true&tail=5'), alice.token);
    expect(s.status).toBe(200);
    expect(s.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await print(['fresh-1', 'fresh-2']);
    await s.until((e) => e.data?.text === 'fresh-2');
    expect(texts(s.events, 'fresh-')).toEqual(['fresh-1', 'fresh-2']);
    expect(s.events.every((e) => e.event === 'line' && typeof e.id === 'string')).toBe(true);
    const before = s.heartbeats;
    await s.until(() => s.heartbeats > before, 30_000).catch(() => undefined);
    expect(s.heartbeats).toBeGreaterThan(before);
    await s.close();
  });

  it('a disconnect and a resume with Last-Event-ID lose no line and repeat none', async () => {
    const first = await openEvents(url(), alice.token);
    // Lines written in one burst often share a docker timestamp: the ids tell them apart.
    const batch1 = Array.from({ length: 40 }, (_, i) => `resume-${String(i).padStart(3, '0')}`);
    await print(batch1);
    await first.until((e) => e.data?.text === batch1.at(-1));
    await first.close();
    const lastSeen = first.events.at(-1)!.id!;

    const batch2 = Array.from({ length: 40 }, (_, i) => `resume-${String(40 + i).padStart(3, '0')}`);
    await print(batch2.slice(0, 20)); // while nobody listens
    const resumed = await openEvents(url(), alice.token, { lastEventId: lastSeen });
    expect(resumed.status).toBe(200);
    await print(batch2.slice(20));
    await resumed.until((e) => e.data?.text === batch2.at(-1));
    await resumed.close();

    const got = [...texts(first.events, 'resume-'), ...texts(resumed.events, 'resume-')];
    expect(got).toEqual([...batch1, ...batch2]);
    const ids = [...first.events, ...resumed.events].map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    const shared = ids.filter((i) => i?.includes('~')).length;
    console.log(`[logs] ${got.length} lines over two connections; ${shared} ids share a timestamp with the line before`);

    // since= starts at a time instead of the tail: nothing before it.
    const fromNow = await openEvents(url(`follow=true&since=${Date.now() / 1000 + 1}`), alice.token);
    await sleep(1500); // a line written after the `since` second (docker's clock is this host's)
    await print(['after-since']);
    await fromNow.until((e) => e.data?.text === 'after-since');
    expect(texts(fromNow.events, 'resume-')).toEqual([]);
    await fromNow.close();
  });

  it("another user's instance is 404 in the error shape; a bad Last-Event-ID or since is 400; plain logs stay JSON", async () => {
    const other = await openEvents(url(), bob.token);
    expect(other.status).toBe(404);
    expect(await other.res.json()).toEqual({ error: 'Instance not found', code: 'INSTANCE_NOT_FOUND', status: 404 });
    const bad = await alice.api.get(`/instance/logs/${id}?follow=true`, { 'last-event-id': 'yesterday' });
    expect(bad.body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    expect((await alice.api.get(`/instance/logs/${id}?follow=true&since=soon`)).body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    expect((await alice.api.get(`/instance/logs/${id}?follow=maybe`)).body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    const plain = await alice.api.get(`/instance/logs/${id}?tail=3`);
    expect(plain.status).toBe(200);
    expect(plain.body.lines).toHaveLength(3);
    expect(plain.body.lines.at(-1)).toBe('after-since');
  });

  it('the stream ends when the instance is deleted', async () => {
    const s = await openEvents(url(), alice.token);
    await alice.api.del(`/instance/delete/${id}`);
    await s.done;
    expect(s.ended).toBe(true);
  });
});
