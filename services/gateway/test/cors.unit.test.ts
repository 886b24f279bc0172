import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { startApp, type Harness } from './app-harness.ts';

// A browser app on another origin calls the API only when its origin is configured (CORS_ORIGINS).

const APP = 'https://app.example.com';
let app: Harness;
beforeAll(async () => {
  app = await startApp({
    env: { CORS_ORIGINS: `${APP}, http://localhost:5173` },
    answers: { [contracts.auth.nonceCreate.subject]: () => ({ nonce: 'n', message: 'm', expires_at: new Date().toISOString() }) },
  });
});
afterAll(async () => {
  await app?.close();
});

const preflight = (origin: string, method = 'POST', path = '/auth/login') =>
  app.send('OPTIONS', path, undefined, {
    Origin: origin,
    'Access-Control-Request-Method': method,
    'Access-Control-Request-Headers': 'authorization, content-type, idempotency-key',
  });
const corsHeaders = (h: Headers) => [...h.keys()].filter((k) => k.startsWith('access-control-'));

describe('CORS', () => {
  it('answers a preflight from an allowed origin with that origin, the methods and the headers a client sends', async () => {
    const res = await preflight(APP);
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(res.headers.get('access-control-allow-methods')!.split(',')).toEqual(expect.arrayContaining(['GET', 'POST', 'PUT', 'DELETE']));
    expect(res.headers.get('access-control-allow-headers')!.split(',')).toEqual(['Authorization', 'Content-Type', 'Idempotency-Key', 'X-Request-ID']);
    expect(res.headers.get('vary')).toMatch(/Origin/);
    expect((await preflight('http://localhost:5173', 'GET', '/instance/status/x')).headers.get('access-control-allow-origin')).toBe('http://localhost:5173');
  });

  it('lets the page read the request id, usage, subscription and retry headers of a real answer', async () => {
    const ok = await app.send('GET', '/auth/nonce?wallet_address=11111111111111111111111111111111', undefined, { Origin: APP });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-origin')).toBe(APP);
    expect(ok.headers.get('access-control-expose-headers')!.split(',')).toEqual([
      'X-Request-ID',
      'X-Usage-Remaining',
      'X-Subscription-Tier',
      'X-Subscription-Expires',
      'Retry-After',
    ]);
    // Errors too: the page must be able to read why it was refused.
    const refused = await app.send('GET', '/auth/me', undefined, { Origin: APP });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe(APP);
  });

  it('gives another origin no CORS header, on the preflight or the request', async () => {
    const pre = await preflight('https://evil.example.com');
    expect(corsHeaders(pre.headers)).toEqual([]);
    const res = await app.send('GET', '/auth/me', undefined, { Origin: 'https://evil.example.com' });
    expect(res.status).toBe(401);
    expect(corsHeaders(res.headers)).toEqual([]);
    // A prefix of an allowed origin is another origin.
    expect(corsHeaders((await preflight(`${APP}.evil.com`)).headers)).toEqual([]);
  });

  it('keeps answering a plain OPTIONS with the methods the path allows', async () => {
    const res = await app.send('OPTIONS', '/auth/login', undefined, { Origin: APP });
    expect(res.status).toBe(204);
    expect(res.headers.get('allow')).toBe('POST');
    expect(corsHeaders(res.headers)).toEqual([]);
  });
});
