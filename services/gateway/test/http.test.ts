import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '@agenthost/testkit';
import { clientIp, Router, trustedProxies } from '../src/http/router.ts';

describe('router', () => {
  const r = new Router();
  r.add('get', '/instance/status/:instanceId', () => 'status');
  r.add('post', '/instance/restart/:instanceId', () => 'restart');
  r.add('get', '/auth/me', () => 'me');

  it('matches static paths case-insensitively and with a trailing slash, keeping parameter case and decoding it', () => {
    expect(r.find('GET', '/Auth/ME/')).toMatchObject({ params: {} });
    expect(r.find('GET', '/instance/status/inst-AbC%2Fx')).toMatchObject({ params: { instanceId: 'inst-AbC/x' } });
    expect(r.find('HEAD', '/instance/status/x')).toMatchObject({ params: { instanceId: 'x' } });
  });

  it('tells a wrong method from an unknown path, and refuses malformed percent-encoding with 400', () => {
    expect(r.find('DELETE', '/instance/status/x')).toEqual({ allowed: ['GET'] });
    expect(r.find('PUT', '/auth/me')).toEqual({ allowed: ['GET'] });
    expect(r.find('GET', '/instance/status')).toBeUndefined();
    expect(r.find('GET', '/instance/status/x/y')).toBeUndefined();
    expect(() => r.find('GET', '/instance/status/%E0%A4%A')).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED', status: 400 }));
  });

  it('never believes X-Forwarded-For unless the peer is a configured proxy', () => {
    // The default: no trusted proxies, so a spoofed header from loopback changes nothing.
    expect(clientIp('127.0.0.1', '198.51.100.1', undefined)).toBe('127.0.0.1');
    const proxies = trustedProxies(['127.0.0.1', '10.1.0.0/16', '::1']);
    expect(clientIp('203.0.113.9', '198.51.100.1', proxies)).toBe('203.0.113.9');
    expect(clientIp('127.0.0.1', '198.51.100.1, 203.0.113.7', proxies)).toBe('203.0.113.7');
    expect(clientIp('::ffff:127.0.0.1', '198.51.100.1, 10.1.2.3', proxies)).toBe('198.51.100.1');
    expect(clientIp('::1', '198.51.100.1, 127.0.0.1', proxies)).toBe('198.51.100.1');
    expect(clientIp('10.2.0.1', '198.51.100.1', proxies)).toBe('10.2.0.1');
  });
});

describe('HTTP layer of the gateway', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ services: ['auth'] });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  const send = (method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${stack.baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });

  it('answers unknown paths and wrong methods with 404 in the error shape, and OPTIONS with the allowed methods', async () => {
    const unknown = await send('GET', '/nope');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: 'No route for GET /api/nope', code: 'NOT_FOUND', status: 404 });
    const outside = await fetch(stack.baseUrl.replace(/\/api$/, '/apix/auth/me'));
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
  const rawExchange = (request: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const url = new URL(stack.baseUrl);
      const socket = net.connect(Number(url.port), url.hostname, () => socket.end(request));
      let data = '';
      socket.on('data', (d) => (data += d.toString()));
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
    });
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
