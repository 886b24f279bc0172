import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError, contracts } from '@agenthost/shared';
import { manualClock, startApp, type Harness } from './app-harness.ts';

// Callers the tier quota does not count (signed in, no subscription) get a small allowance per minute. The minute is
// the harness's clock (app-harness.ts), so the test neither waits out a minute boundary nor races one.

let app: Harness;
let statusCalls = 0;
// Ten seconds into a minute.
const clock = manualClock(Date.UTC(2030, 0, 1, 12, 0, 10));

beforeAll(async () => {
  app = await startApp({
    clock,
    env: { UNCOUNTED_REQUESTS_PER_MINUTE: '5' },
    answers: {
      [contracts.billing.status.subject]: () => {
        statusCalls++;
        throw new AppError('SUBSCRIPTION_NOT_FOUND');
      },
    },
  });
});
afterAll(async () => {
  await app?.close();
});

const get = async (token: string, path: string, method = 'GET') => {
  const res = await app.send(method, path, undefined, { authorization: `Bearer ${token}` });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
};

describe('callers without a subscription', () => {
  it('get a few requests a minute, then 429 RATE_LIMITED with Retry-After, without reaching billing-chain', async () => {
    const user = await app.token();
    for (let i = 0; i < 5; i++) expect((await get(user, '/subscription/status')).status).toBe(404);
    const before = statusCalls;
    const refused = await get(user, '/subscription/status');
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await get(user, '/subscription/refresh', 'POST')).status).toBe(429);
    expect(statusCalls).toBe(before);
    // Another user has an allowance of their own.
    expect((await get(await app.token(), '/subscription/status')).status).toBe(404);
  });

  it('says when the minute ends, and gives the allowance back in the next one', async () => {
    const user = await app.token();
    clock.advance(60_000 - (clock.now() % 60_000) + 5_000);
    for (let i = 0; i < 5; i++) await get(user, '/subscription/status');
    clock.advance(40_000);
    const refused = await get(user, '/subscription/status');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('15');
    clock.advance(15_000);
    expect((await get(user, '/subscription/status')).status).toBe(404);
  });
});
