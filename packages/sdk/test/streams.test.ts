import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Session } from '@agenthost/testkit';
import { docker, containerName, instanceStack, waitFor } from '@agenthost/testkit';
import { AgenthostError, createAgenthost, type Agenthost } from '../src/index.ts';

// The SDK's streams against a real stack, through a TCP relay the test can cut: a dropped connection is resumed by
// Last-Event-ID, so the caller's loop sees every line and event once.

const RELAY_PORT = 19420;
let sys: Awaited<ReturnType<typeof instanceStack>>;
let alice: Session;
let sdk: Agenthost;
/** Plain calls go straight to the gateway: a POST on a keep-alive socket the relay just cut would fail, as it should. */
let direct: Agenthost;
let relay: net.Server;
const open = new Set<net.Socket>();
/** The relay answers this many next connections with 503 SERVICE_UNAVAILABLE itself. */
let refusing = 0;

beforeAll(async () => {
  sys = await instanceStack('sdk', [19421, 19429]);
  alice = await sys.subscriber();
  const target = new URL(sys.stack.baseUrl);
  relay = net.createServer((client) => {
    if (refusing > 0) {
      // A busy platform's answer to a resume: the stream must wait and go on, not end.
      refusing--;
      const body = JSON.stringify({ error: 'The API is unavailable; retry shortly', code: 'SERVICE_UNAVAILABLE', status: 503 });
      client.on('error', () => undefined);
      client.once('data', () =>
        client.end(
          `HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
        ),
      );
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    client.pipe(upstream).pipe(client);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('error', () => undefined);
      s.on('close', () => (open.delete(s), client.destroy(), upstream.destroy()));
    }
  });
  await new Promise<void>((r) => relay.listen(RELAY_PORT, '127.0.0.1', r));
  sdk = createAgenthost({ baseUrl: `http://127.0.0.1:${RELAY_PORT}${target.pathname}`, token: alice.token, retryMs: 200 });
  direct = createAgenthost({ baseUrl: sys.stack.baseUrl, token: alice.token });
}, 240_000);

afterAll(async () => {
  relay?.close();
  for (const s of open) s.destroy();
  await sys?.stop();
});

/** Drops every connection through the relay, as a network failure would. */
const cut = () => {
  const n = open.size;
  for (const s of open) s.destroy();
  return n;
};

/** The promise, or a failure naming what did not happen within `ms`. */
const within = <T>(what: string, p: Promise<T>, ms = 60_000): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`waited ${ms / 1000} s for ${what}`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
};

describe('the SDK', () => {
  it('waitFor, then logs and events that resume after a cut connection, losing and repeating nothing', async () => {
    const created = await direct.api.POST('/instance/create', { body: { framework: 'openclaw' } });
    const id = created.data!.instance_id;
    expect((await direct.waitFor(id, 'running', { timeoutSeconds: 120 })).status).toBe('running');
    const print = (lines: string[]) => docker('exec', containerName(id), 'sh', '-c', `printf '%s\\n' ${lines.join(' ')} > /proc/1/fd/1`);

    const stop = new AbortController();
    const seen: string[] = [];
    const events: string[] = [];
    const ids: string[] = [];
    let started = false;
    // Each step is bounded and named: a stream that stalls fails the test there, saying what it waited for and what
    // the streams had delivered by then.
    const until = (what: string, pred: () => boolean) =>
      waitFor(
        what,
        async () => {
          if (!pred()) throw new Error(`lines ${JSON.stringify(seen)}, events ${JSON.stringify(events)}`);
          return true;
        },
        60_000,
        50,
      );
    const reading = (async () => {
      for await (const line of sdk.logs(id, { follow: true, tail: 1, signal: stop.signal })) {
        if (line.text === 'sdk-start') started = true;
        else if (line.text.startsWith('sdk-')) seen.push(line.text);
      }
    })();
    const watching = (async () => {
      for await (const ev of sdk.events(id)) {
        events.push(ev.event === 'deleted' ? 'deleted' : `${ev.event}:${(ev.data as { status: string }).status}`);
        if (ev.event !== 'current') ids.push(ev.id!);
      }
    })();
    const batch = (from: number) => Array.from({ length: 10 }, (_, i) => `sdk-${from + i}`);
    await until('the first event', () => events.length > 0);
    // The log stream is open once it has the marker: as the last line (tail 1) or followed. Lines printed before it
    // opened would be cut by the tail, which is not what this test is about.
    await print(['sdk-start']);
    await until('the log stream open', () => started);
    await print(batch(0));
    await until('10 lines', () => seen.length === 10);
    refusing = 2; // both streams are refused once on their way back
    expect(cut()).toBeGreaterThan(0);
    await print(batch(10)); // written while the connection is down
    await until('20 lines', () => seen.length === 20);
    expect(refusing).toBe(0);
    await print(batch(20));
    await until('30 lines', () => seen.length === 30);
    expect(seen).toEqual([...batch(0), ...batch(10), ...batch(20)]);

    const stopped = await direct.api.POST('/instance/stop/{instanceId}', { params: { path: { instanceId: id } } });
    expect(stopped.response.status, JSON.stringify(stopped.error)).toBe(200);
    await until('the stopped event', () => events.includes('status:stopped'));
    cut();
    const deleted = await direct.api.DELETE('/instance/delete/{instanceId}', { params: { path: { instanceId: id } } });
    expect(deleted.response.status, JSON.stringify(deleted.error)).toBe(200);
    await until('the deleted event', () => events.includes('deleted'));
    await within('the event stream to end after deleted', watching);
    expect(events[0]).toBe('current:running');
    expect(events.at(-1)).toBe('deleted');
    expect(new Set(ids).size).toBe(ids.length); // none repeated across the cut
    await within('the log stream to end with the instance', reading);

    // The first connection's refusal is thrown with the API's code.
    const err = await sdk.waitFor(id, 'running', { timeoutSeconds: 5 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgenthostError);
    expect(err).toMatchObject({ status: 404, code: 'INSTANCE_NOT_FOUND' });
  }, 240_000);
});
