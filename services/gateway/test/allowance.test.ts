import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError, contracts, createLogger, endpoint, serve } from '@agenthost/shared';
import { signIn, startStack, type Stack } from '@agenthost/testkit';
import type { NatsConnection } from 'nats';

// Callers the tier quota does not count (signed in, no subscription) get a small allowance per minute.

let stack: Stack;
let billing: NatsConnection;
let statusCalls = 0;

beforeAll(async () => {
  stack = await startStack({ services: ['auth'], serviceEnv: { gateway: { UNCOUNTED_REQUESTS_PER_MINUTE: '5' } } });
  billing = await stack.nats.connect();
  await serve(billing, { name: 'billing-chain', version: '0.0.0', log: createLogger('fake-billing', 'silent') }, [
    endpoint(contracts.billing.status, async () => {
      statusCalls++;
      throw new AppError('SUBSCRIPTION_NOT_FOUND');
    }),
  ]);
});
afterAll(async () => {
  await billing?.drain();
  await stack?.stop();
});

describe('callers without a subscription', () => {
  it('get a few requests a minute, then 429 RATE_LIMITED with Retry-After, without reaching billing-chain', async () => {
    // Stay clear of a minute boundary, where the window starts over.
    if (Date.now() % 60_000 > 50_000) await new Promise((r) => setTimeout(r, 61_000 - (Date.now() % 60_000)));
    const user = await signIn(stack.api);
    for (let i = 0; i < 5; i++) expect((await user.api.get('/subscription/status')).status).toBe(404);
    const before = statusCalls;
    const refused = await user.api.get('/subscription/status');
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await user.api.post('/subscription/refresh')).status).toBe(429);
    expect(statusCalls).toBe(before);
    // Another user has an allowance of their own.
    expect((await (await signIn(stack.api)).api.get('/subscription/status')).status).toBe(404);
  }, 90_000);
});
