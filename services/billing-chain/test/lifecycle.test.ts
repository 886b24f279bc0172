import { setTimeout as sleep } from 'node:timers/promises';
import type { NatsConnection } from 'nats';
import { PERIOD_SECONDS } from '@agenthost/subscription-program';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainClient, signIn, startStack, subscribe, waitFor, type DevchainClient, type Session, type Stack } from '@agenthost/testkit';

// The subscription over its life, end to end over HTTP with real transactions on devchain:
// tier changes (refresh, TTL), pick-up without register, renewal by the keeper, expiry, cancellation.

const eventually = <T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> =>
  waitFor(
    'the condition',
    async () => {
      const v = await fn();
      return ok(v) ? v : undefined;
    },
    timeoutMs,
    200,
  );

describe('tier changes (pick-up off)', () => {
  let stack: Stack;
  let chain: DevchainClient;
  beforeAll(async () => {
    stack = await startStack({
      services: ['auth', 'billing-chain'],
      devchain: true,
      serviceEnv: { 'billing-chain': { BACKGROUND_JOBS: 'false', SUBSCRIPTION_CACHE_TTL_SECONDS: '2' } },
    });
    chain = chainClient(stack);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('takes effect at once after POST /subscription/refresh', async () => {
    const s = await signIn(stack.api);
    await subscribe(stack, s, { tier: 'pro', airdrop: 2_000_000_000 });
    expect((await s.api.get('/subscription/status')).headers.get('x-subscription-tier')).toBe('pro');
    await chain.subscribe(s.wallet, 'enterprise');
    const r = await s.api.post('/subscription/refresh');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ tier: 'enterprise', is_active: true, instances_limit: -1, requests_limit: -1, storage_limit_mb: 10240 });
    expect(r.headers.get('x-subscription-tier')).toBe('enterprise');
    expect(r.headers.get('x-usage-remaining')).toBe('-1');
    const st = await s.api.get('/subscription/status');
    expect({ status: st.status, tier: st.body.tier }, JSON.stringify(st.body)).toEqual({ status: 200, tier: 'enterprise' });
    expect(st.headers.get('x-subscription-tier')).toBe('enterprise');
  });

  it('takes effect after the cache TTL without any call to refresh', async () => {
    const s = await signIn(stack.api);
    await subscribe(stack, s, { tier: 'enterprise', airdrop: 2_000_000_000 });
    await chain.subscribe(s.wallet, 'pro');
    // Within the TTL the cached tier is served.
    expect((await s.api.get('/subscription/status')).body.tier).toBe('enterprise');
    await sleep(2100);
    const st = await s.api.get('/subscription/status');
    expect(st.body.tier).toBe('pro');
    expect(st.headers.get('x-subscription-tier')).toBe('pro');
    // The change was announced: the next call's pipeline (headers, limits) already uses pro.
    const m = await s.api.get('/usage/metrics');
    expect(m.body.tier).toBe('pro');
    expect(m.headers.get('x-subscription-tier')).toBe('pro');
  });
});

describe('keeper, pick-up and cancellation', () => {
  let stack: Stack;
  let chain: DevchainClient;
  let nc: NatsConnection;
  const seenCreates: Record<string, unknown>[] = [];

  beforeAll(async () => {
    stack = await startStack({
      services: ['auth', 'billing-chain'],
      devchain: true,
      serviceEnv: { 'billing-chain': { POLL_INTERVAL_SECONDS: '0.5' }, gateway: { ENTITLEMENT_CACHE_TTL_MS: '60000' } },
    });
    chain = chainClient(stack);
    // Stands in for the provisioner: refuses creates for a cancelled subscription, as the provisioner does.
    nc = await stack.nats.connect();
    nc.subscribe('provisioner.v1.instances.create', {
      callback: (_e, m) => {
        const input = JSON.parse(new TextDecoder().decode(m.data)) as Record<string, unknown>;
        seenCreates.push(input);
        const reply = input.subscription_cancelled
          ? { ok: false, error: { code: 'SUBSCRIPTION_CANCELLED', message: 'Subscription is cancelled; no new instances can be created' } }
          : { ok: false, error: { code: 'DOCKER_UNAVAILABLE', message: 'stub' } };
        m.respond(new TextEncoder().encode(JSON.stringify(reply)));
      },
    });
  });
  afterAll(async () => {
    await nc?.close();
    await stack?.stop();
  });

  it('picks up a subscription made on chain without register', async () => {
    const s = await signIn(stack.api);
    await subscribe(stack, s, { tier: 'pro', register: false });
    const st = await eventually(
      () => s.api.get('/subscription/status'),
      (r) => r.status === 200,
    );
    expect(st.body).toMatchObject({ tier: 'pro', is_active: true, cancelled: false });
    // The event reached the gateway: its cached "no subscription" was replaced at once (its TTL here is 60 s).
    const m = await s.api.get('/usage/metrics');
    expect(m.status).toBe(200);
  });

  it('renews with a balance, deactivates without one, and a cancelled subscription lasts until expires_at', async () => {
    const price = stack.chain!.prices.pro;
    const renewer = await signIn(stack.api);
    const lapser = await signIn(stack.api);
    const canceller = await signIn(stack.api);
    await subscribe(stack, renewer, { tier: 'pro', deposit: price });
    await subscribe(stack, lapser, { tier: 'pro' });
    await subscribe(stack, canceller, { tier: 'pro', deposit: price });
    for (const s of [renewer, lapser, canceller]) expect((await s.api.get('/usage/metrics')).status).toBe(200);

    // Cancellation: observed from the chain, access continues, no new instances.
    const c = await chain.cancel(canceller.wallet);
    expect(c.err).toBeNull();
    const cancelled = await eventually(
      () => canceller.api.get('/subscription/status'),
      (r) => r.body?.cancelled === true,
    );
    expect(cancelled.body).toMatchObject({ is_active: true, tier: 'pro' });
    expect((await canceller.api.get('/usage/metrics')).status).toBe(200);
    const create = await canceller.api.post('/instance/create', { framework: 'openclaw' });
    expect(create.status).toBe(403);
    expect(create.body.code).toBe('SUBSCRIPTION_CANCELLED');
    expect(seenCreates.at(-1)).toMatchObject({ subscription_cancelled: true });

    const before = await chain.subscription(renewer.wallet);
    const expiresBefore = (await renewer.api.get('/subscription/status')).body.expires_at as string;
    await stack.chain!.advanceClock(PERIOD_SECONDS + 60);

    // With a prepaid balance: renewed by the keeper, 30 more days, the price left the balance.
    const renewed = await eventually(
      () => renewer.api.get('/subscription/status'),
      (r) => r.body?.expires_at !== expiresBefore,
    );
    expect(renewed.body).toMatchObject({ is_active: true, tier: 'pro' });
    expect(Date.parse(renewed.body.expires_at) - Date.parse(expiresBefore)).toBe(PERIOD_SECONDS * 1000);
    const after = await chain.subscription(renewer.wallet);
    expect(before!.lamports - after!.lamports).toBe(price);
    expect(after!.isActive).toBe(true);
    expect((await renewer.api.get('/usage/metrics')).status).toBe(200);

    // Without one: inactive, and the API answers 402.
    const lapsed = await eventually(
      () => lapser.api.get('/subscription/status'),
      (r) => r.body?.is_active === false,
    );
    expect(lapsed.headers.get('x-subscription-tier')).toBe('none');
    // (The view is inactive as soon as expires_at passes; the keeper's renew then deactivates it on chain.)
    await eventually(
      () => chain.subscription(lapser.wallet),
      (a) => a?.isActive === false,
    );
    const m = await eventually(
      () => lapser.api.get('/usage/metrics'),
      (r) => r.status === 402,
    );
    expect(m.body).toEqual({ error: expect.any(String), code: 'SUBSCRIPTION_REQUIRED', status: 402 });

    // Cancelled: access ended at expires_at even though a balance was there.
    await eventually(
      () => canceller.api.get('/usage/metrics'),
      (r) => r.status === 402,
    );
    expect((await canceller.api.get('/subscription/status')).body).toMatchObject({ is_active: false, cancelled: true });
  });

  it('a new subscribe after lapsing restores access (through register)', async () => {
    const s: Session = await signIn(stack.api);
    await subscribe(stack, s, { tier: 'free' });
    expect((await s.api.get('/usage/metrics')).body.tier).toBe('free');
  });
});
