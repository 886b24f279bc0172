import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Route } from '../src/http/route.ts';
import { startApp, type Harness } from './app-harness.ts';

// The gateway's HTTP layer in this process (app-harness.ts): routing, the client address, the error shape, bodies
// and what the HTTP parser refuses, with no backend running.

/** The gateway's Express app with its own routes (no backends): routing and the client address as Express does them. */
async function localApp(routes: Route[], trustedProxies: string[] = []): Promise<{ url: string; close: () => Promise<void> }> {
  const app = await startApp({ routes: () => routes, env: { TRUSTED_PROXIES: trustedProxies.join(',') } });
  return { url: app.baseUrl, close: app.close };
}

describe('routes on Express', () => {
  let app: Awaited<ReturnType<typeof localApp>>;
  beforeAll(async () => {
    app = await localApp([
      { method: 'get', path: '/instance/status/:instanceId', access: 'public', summary: 'status', handler: ({ req }) => ({ params: req.params }) },
      { method: 'post', path: '/instance/restart/:instanceId', access: 'public', summary: 'restart', handler: () => ({}) },
      { method: 'get', path: '/auth/me', access: 'public', summary: 'me', handler: () => ({ me: true }) },
    ]);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('matches static paths case-insensitively and with a trailing slash, keeping parameter case and decoding it', async () => {
    expect(await (await fetch(`${app.url}/Auth/ME/`)).json()).toEqual({ me: true });
    expect(await (await fetch(`${app.url}/instance/status/inst-AbC%2Fx`)).json()).toEqual({ params: { instanceId: 'inst-AbC/x' } });
    expect((await fetch(`${app.url}/instance/status/x`, { method: 'HEAD' })).status).toBe(200);
  });

  it('tells a wrong method from an unknown path, and refuses malformed percent-encoding with 400', async () => {
    const wrong = await fetch(`${app.url}/instance/status/x`, { method: 'DELETE' });
    expect(wrong.status).toBe(404);
    const options = await fetch(`${app.url}/instance/status/x`, { method: 'OPTIONS' });
    expect([options.status, options.headers.get('allow')]).toEqual([204, 'GET, HEAD']);
    expect((await fetch(`${app.url}/instance/status`)).status).toBe(404);
    expect((await fetch(`${app.url}/instance/status/x/y`)).status).toBe(404);
    const malformed = await fetch(`${app.url}/instance/status/%E0%A4%A`);
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual({ error: 'The path has malformed percent-encoding', code: 'VALIDATION_FAILED', status: 400 });
  });

  it('never believes X-Forwarded-For unless the peer is a configured proxy', async () => {
    const ipRoute: Route = { method: 'get', path: '/ip', access: 'public', summary: 'ip', handler: ({ meta }) => ({ ip: meta.ip }) };
    const ipSeen = async (proxies: string[], forwarded: string) => {
      const a = await localApp([ipRoute], proxies);
      try {
        return ((await (await fetch(`${a.url}/ip`, { headers: { 'x-forwarded-for': forwarded } })).json()) as { ip: string }).ip;
      } finally {
        await a.close();
      }
    };
    // The default: no trusted proxies, so a spoofed header from loopback changes nothing.
    expect(await ipSeen([], '198.51.100.1')).toBe('127.0.0.1');
    expect(await ipSeen(['10.1.0.0/16'], '198.51.100.1')).toBe('127.0.0.1');
    const proxies = ['127.0.0.1', '10.1.0.0/16', '::1'];
    expect(await ipSeen(proxies, '198.51.100.1, 203.0.113.7')).toBe('203.0.113.7');
    expect(await ipSeen(proxies, '198.51.100.1, 10.1.2.3')).toBe('198.51.100.1');
    expect(await ipSeen(proxies, '198.51.100.1, 127.0.0.1')).toBe('198.51.100.1');
  });
});

describe('HTTP layer of the gateway', () => {
  let app: Harness;
  beforeAll(async () => {
    app = await startApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  const send = (method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}): Promise<Response> =>
    app.send(method, path, body, headers);

  it('answers unknown paths and wrong methods with 404 in the error shape, and OPTIONS with the allowed methods', async () => {
    const unknown = await send('GET', '/nope');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: 'No route for GET /api/nope', code: 'NOT_FOUND', status: 404 });
    const outside = await fetch(app.baseUrl.replace(/\/api$/, '/apix/auth/me'));
    expect(outside.status).toBe(404);
    const wrong = await send('DELETE', '/auth/login');
    expect(wrong.status).toBe(404);
    const options = await send('OPTIONS', '/auth/login');
    expect(options.status).toBe(204);
    expect(options.headers.get('allow')).toBe('POST');
  });

  it('answers HEAD like GET without a body, and echoes a safe X-Request-ID', async () => {
    const head = await send('HEAD', '/health/live', undefined, { 'x-request-id': 'client-id-123' });
    expect(head.status).toBe(200);
    expect(head.headers.get('x-request-id')).toBe('client-id-123');
    expect(await head.text()).toBe('');
    const unsafe = await send('GET', '/health/live', undefined, { 'x-request-id': 'bad id' });
    expect(unsafe.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('reads gzip bodies, and refuses other charsets, non-object JSON and unknown encodings with clear 4xx codes', async () => {
    const json = { 'content-type': 'application/json' };
    // Parsed (so the contract reports the missing fields), not refused as unreadable.
    const zipped = await send('POST', '/auth/login', gzipSync(JSON.stringify({ wallet_address: 'abc' })), { ...json, 'content-encoding': 'gzip' });
    expect(zipped.status).toBe(400);
    expect(((await zipped.json()) as { code: string }).code).toBe('VALIDATION_FAILED');
    const latin = await send('POST', '/auth/login', '{}', { 'content-type': 'application/json; charset=latin1' });
    expect(latin.status).toBe(415);
    expect(((await latin.json()) as { code: string }).code).toBe('UNSUPPORTED_MEDIA_TYPE');
    const scalar = await send('POST', '/auth/login', '"just a string"', json);
    expect(scalar.status).toBe(400);
    expect(((await scalar.json()) as { code: string }).code).toBe('INVALID_JSON');
    const brokenZip = await send('POST', '/auth/login', 'not gzip at all', { ...json, 'content-encoding': 'gzip' });
    expect(brokenZip.status).toBe(400);
    const compress = await send('POST', '/auth/login', '{}', { ...json, 'content-encoding': 'compress' });
    expect(compress.status).toBe(415);
    const bomb = await send('POST', '/auth/login', gzipSync(JSON.stringify({ pad: 'x'.repeat(1_000_000) })), { ...json, 'content-encoding': 'gzip' });
    expect(bomb.status).toBe(413);
    expect(((await bomb.json()) as { code: string }).code).toBe('PAYLOAD_TOO_LARGE');
    // The connection still serves after each refusal.
    expect((await send('GET', '/health/live')).status).toBe(200);
  });

  /** A raw HTTP exchange, for requests that fetch would refuse to send. */
  const rawExchange = (request: string): Promise<string> => app.raw(request);
  const parse = (answer: string) => {
    const [head, body] = answer.split('\r\n\r\n') as [string, string];
    return { status: Number(head.split(' ')[1]), head: head.toLowerCase(), body: JSON.parse(body) as { code: string; status: number; error: string } };
  };

  it('answers what the HTTP parser refuses in the error shape, with the usual headers', async () => {
    const longUrl = parse(await rawExchange(`GET /api/health/live?pad=${'x'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`));
    expect(longUrl.status).toBe(431);
    expect(longUrl.body).toEqual({ error: 'The request line or headers are too large', code: 'REQUEST_HEADER_TOO_LARGE', status: 431 });
    expect(longUrl.head).toMatch(/x-request-id: [0-9a-f-]{36}/);
    expect(longUrl.head).toContain('x-subscription-tier: none');
    expect(longUrl.head).toContain('x-usage-remaining: 0');
    const bigHeader = parse(await rawExchange(`GET /api/health/live HTTP/1.1\r\nHost: x\r\nX-Pad: ${'y'.repeat(20_000)}\r\n\r\n`));
    expect(bigHeader.status).toBe(431);
    expect(bigHeader.body.code).toBe('REQUEST_HEADER_TOO_LARGE');
    const garbage = parse(await rawExchange('NOT AN HTTP REQUEST\r\n\r\n'));
    expect(garbage.status).toBe(400);
    expect(garbage.body).toEqual({ error: 'The HTTP request is malformed', code: 'MALFORMED_REQUEST', status: 400 });
    expect((await send('GET', '/health/live')).status).toBe(200);
  });
});
