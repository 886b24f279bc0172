import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEdge, startStack, type Edge, type Stack } from '@agenthost/testkit';

// Slow clients at the edge: a client that sends its headers, or its body, a byte at a time is cut off by the edge's
// timeouts (EDGE_READ_HEADER_TIMEOUT_SECONDS, EDGE_READ_TIMEOUT_SECONDS), while a normal client is served meanwhile.
// Assertions count bytes, not time: the slow client is cut off before it could finish sending.

// Ports of this suite: the edge 19610 (HTTPS) and 19611 (HTTP).
const HTTPS = 19610;
const HTTP = 19611;

let stack: Stack;
let edge: Edge;

beforeAll(async () => {
  stack = await startStack({ services: ['auth'] });
  edge = await startEdge(stack, { httpsPort: HTTPS, httpPort: HTTP, env: { EDGE_READ_HEADER_TIMEOUT_SECONDS: '3', EDGE_READ_TIMEOUT_SECONDS: '5' } });
}, 120_000);

afterAll(async () => {
  await edge?.stop();
  await stack?.stop();
});

interface Trickle {
  /** Bytes written before the edge answered or closed. */
  sent: number;
  total: number;
  /** What the edge sent back before it closed the connection. */
  answer: string;
}

/** Over one TLS connection to the edge, send `head` at once, then `slow` one byte per interval, until the edge ends it. */
function trickle(head: string, slow: string, everyMs: number): Promise<Trickle> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: HTTPS, servername: edge.domain, ca: edge.ca(), ALPNProtocols: ['http/1.1'] }, () => {
      // (An empty write would be an empty TLS record, which the server takes for a malformed request.)
      if (head) socket.write(head);
      const timer = setInterval(() => {
        if (sent >= slow.length || socket.destroyed) return clearInterval(timer);
        socket.write(slow[sent++]!);
      }, everyMs);
      socket.once('close', () => clearInterval(timer));
    });
    let sent = 0;
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (answer += d));
    socket.on('error', () => {}); // a reset after the edge gave up is the same outcome as a close
    socket.on('close', () => resolve({ sent, total: slow.length, answer }));
    socket.on('timeout', () => reject(new Error('never cut off')));
  });
}

/** A normal client through the edge, repeatedly, while `until` runs: every answer must be the API's 200. */
async function servedMeanwhile<T>(until: Promise<T>): Promise<{ result: T; statuses: number[] }> {
  const statuses: number[] = [];
  let done = false;
  const result = until.finally(() => (done = true));
  while (!done) {
    const r = await edge.request(`${edge.origin}/api/auth/nonce?wallet_address=11111111111111111111111111111111`);
    statuses.push(r.status);
    await sleep(300);
  }
  return { result: await result, statuses };
}

describe('slow clients at the edge', () => {
  it('closes a connection whose request headers arrive a byte at a time, while a normal client is served', async () => {
    // A header line that would take minutes at this pace.
    const slow = `GET /api/auth/me HTTP/1.1\r\nHost: ${edge.domain}:${HTTPS}\r\nX-Pad: ${'a'.repeat(600)}\r\n\r\n`;
    const { result, statuses } = await servedMeanwhile(trickle('', slow, 200));
    expect(result.sent).toBeLessThan(result.total);
    // Cut off without a request reaching the API: no answer at all, or the server's own 4xx before closing.
    expect(result.answer === '' || /^HTTP\/1\.1 4\d\d /.test(result.answer), result.answer).toBe(true);
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 200)).toBe(true);
  }, 120_000);

  it('answers 408 REQUEST_TIMEOUT in the error shape to a body sent a byte at a time, while a normal client is served', async () => {
    const body = JSON.stringify({ wallet_address: '11111111111111111111111111111111', signature_base58: '1'.repeat(88), nonce: 'x'.repeat(22) }).padEnd(
      1000,
      ' ',
    );
    const head = `POST /api/auth/login HTTP/1.1\r\nHost: ${edge.domain}:${HTTPS}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const { result, statuses } = await servedMeanwhile(trickle(head, body, 100));
    expect(result.sent).toBeLessThan(result.total);
    const [status, ...rest] = result.answer.split('\r\n\r\n');
    expect(status).toMatch(/^HTTP\/1\.1 408 /);
    expect(JSON.parse(rest.join('\r\n\r\n'))).toEqual({ error: expect.any(String), code: 'REQUEST_TIMEOUT', status: 408 });
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 200)).toBe(true);
  }, 120_000);
});
