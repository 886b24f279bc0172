import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, gatewayUrl, signIn, startStack, subscribe, type ApiClient, type Session, type Stack } from '@agenthost/testkit';

// Tier limits over HTTP: the daily quota is exact under concurrency, with one and with two gateway
// replicas sharing one database; the per-minute limit answers 429 with Retry-After.

const N = 30;
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    services: ['auth', 'billing-chain'],
    devchain: true,
    env: {
      TIER_LIMITS_JSON: JSON.stringify({
        pro: { requests_per_day: N, requests_per_minute: 100_000 },
        free: { requests_per_day: 1000, requests_per_minute: 5 },
      }),
    },
    serviceEnv: { 'billing-chain': { BACKGROUND_JOBS: 'false' } },
  });
});
afterAll(async () => {
  await stack?.stop();
});

async function subscriber(tier: 'pro' | 'free' | 'enterprise'): Promise<Session> {
  const s = await signIn(stack.api);
  await subscribe(stack, s, { tier });
  return s;
}

function tally(statuses: number[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const s of statuses) out[s] = (out[s] ?? 0) + 1;
  return out;
}

describe('daily limit', () => {
  it('one gateway: of 3N parallel requests exactly N succeed, the rest get 403 DAILY_LIMIT_EXCEEDED', async () => {
    const s = await subscriber('pro');
    const rs = await Promise.all(Array.from({ length: 3 * N }, () => s.api.get('/usage/metrics')));
    expect(tally(rs.map((r) => r.status))).toEqual({ 200: N, 403: 2 * N });
    const refused = rs.find((r) => r.status === 403)!;
    expect(refused.body).toEqual({ error: expect.any(String), code: 'DAILY_LIMIT_EXCEEDED', status: 403 });
    expect(refused.headers.get('x-usage-remaining')).toBe('0');
    expect(refused.headers.get('x-subscription-tier')).toBe('pro');
    const remaining = rs
      .filter((r) => r.status === 200)
      .map((r) => Number(r.headers.get('x-usage-remaining')))
      .sort((a, b) => a - b);
    expect(remaining[0]).toBe(0);
    expect(remaining.at(-1)).toBeLessThanOrEqual(N - 1);
    const st = await s.api.get('/subscription/status');
    expect(st.status).toBe(403);
  });

  it('two gateways sharing one database: of 3N parallel requests exactly N succeed', async () => {
    if (stack.gateways.length < 2) await stack.addReplica('gateway', 'gateway-b');
    const s = await subscriber('pro');
    const clients: ApiClient[] = stack.gateways.slice(0, 2).map((g) => apiClient(gatewayUrl(g), s.token));
    // Warm both replicas (each leases a block), then the burst.
    const rs = await Promise.all(Array.from({ length: 3 * N }, (_, i) => clients[i % 2]!.get('/usage/metrics')));
    expect(tally(rs.map((r) => r.status))).toEqual({ 200: N, 403: 2 * N });
    const metrics = await clients[1]!.get('/usage/metrics');
    expect(metrics.status).toBe(403);
  });

  it('two gateways: a quota block held by an idle replica is not lost to the other', async () => {
    if (stack.gateways.length < 2) await stack.addReplica('gateway', 'gateway-b');
    const s = await subscriber('pro');
    const [a, b] = stack.gateways.slice(0, 2).map((g) => apiClient(gatewayUrl(g), s.token));
    for (let i = 0; i < 3; i++) expect((await a!.get('/usage/metrics')).status).toBe(200);
    const rs = await Promise.all(Array.from({ length: 2 * N }, () => b!.get('/usage/metrics')));
    expect(tally(rs.map((r) => r.status))).toEqual({ 200: N - 3, 403: N + 3 });
  });

  it('headers count down, and registering (an upgrade) is not refused at the limit', async () => {
    const s = await subscriber('pro');
    const first = await s.api.get('/usage/metrics');
    expect(first.headers.get('x-usage-remaining')).toBe(String(N - 1));
    expect(first.body.requests).toMatchObject({ used: 1, limit: N, remaining: N - 1 });
    expect(Date.parse(first.body.requests.reset_at) % 86_400_000).toBe(0);
    const second = await s.api.get('/usage/metrics');
    expect(second.headers.get('x-usage-remaining')).toBe(String(N - 2));
    await Promise.all(Array.from({ length: N }, () => s.api.get('/usage/metrics')));
    expect((await s.api.get('/usage/metrics')).status).toBe(403);
    await subscribe(stack, s, { tier: 'enterprise' });
    const after = await s.api.get('/usage/metrics');
    expect(after.status).toBe(200);
    expect(after.headers.get('x-usage-remaining')).toBe('-1');
    expect(after.body.requests).toMatchObject({ limit: -1, remaining: -1, used: N + 1 });
  });
});

describe('per-minute limit', () => {
  it('answers 429 RATE_LIMITED with Retry-After', async () => {
    const s = await subscriber('free');
    const rs = [];
    for (let i = 0; i < 6; i++) rs.push(await s.api.get('/usage/metrics'));
    expect(rs.slice(0, 5).every((r) => r.status === 200)).toBe(true);
    const limited = rs[5]!;
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ error: expect.any(String), code: 'RATE_LIMITED', status: 429 });
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // The refused request did not spend the daily quota.
    expect(limited.headers.get('x-usage-remaining')).toBe('995');
  });
});
