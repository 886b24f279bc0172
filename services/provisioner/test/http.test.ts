import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  chainClient,
  recordSecret,
  signIn,
  startStack,
  subscribe,
  type Session,
  type Stack,
  cleanupDocker,
  dockerTry,
  gatewayEnv,
  provisionerEnv,
  testNetwork,
  waitFor,
} from '@agenthost/testkit';

const network = testNetwork('http');

let stack: Stack;
let free: Session;
let pro: Session;

beforeAll(async () => {
  await cleanupDocker(network);
  stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    serviceEnv: { provisioner: provisionerEnv({ network, ports: [18280, 18299] }), gateway: gatewayEnv },
  });
  free = await signIn(stack.api);
  await subscribe(stack, free, { tier: 'free' });
  pro = await signIn(stack.api);
  await subscribe(stack, pro, { tier: 'pro' });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await cleanupDocker(network);
});

describe('instances through the HTTP API', () => {
  it('creates, reports status, and deletes an instance for a subscriber', async () => {
    const c = await free.api.post('/instance/create', { framework: 'openclaw', name: 'http agent' });
    expect(c.status).toBe(200);
    expect(c.headers.get('x-subscription-tier')).toBe('free');
    expect(c.body).toMatchObject({
      name: 'http agent',
      status: 'provisioning',
      framework: 'openclaw',
      url: expect.stringMatching(/^https:\/\/inst-[0-9a-f]+\.agenthost\.localhost$/),
    });
    for (const f of ['instance_id', 'port', 'created_at', 'estimated_ready', 'access_token']) expect(c.body, f).toHaveProperty(f);
    const id = c.body.instance_id as string;
    recordSecret(c.body.access_token);

    const s = await waitFor('running', async () => {
      const r = await free.api.get(`/instance/status/${id}`);
      expect(r.status).toBe(200);
      return r.body.status === 'running' ? r.body : undefined;
    });
    for (const f of [
      'instance_id',
      'name',
      'status',
      'framework',
      'port',
      'url',
      'uptime_seconds',
      'cpu_usage_percent',
      'memory_usage_mb',
      'memory_limit_mb',
      'created_at',
      'last_activity',
    ]) {
      expect(s, f).toHaveProperty(f);
    }
    expect((await free.api.get('/instance/list')).body.instances).toHaveLength(1);
    const logs = await free.api.get(`/instance/logs/${id}?tail=5`);
    expect(logs.status).toBe(200);
    expect(logs.body.lines.length).toBeLessThanOrEqual(5);
    expect((await free.api.get(`/instance/logs/${id}?tail=nope`)).body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });

    // The instance limit of the free tier (1): 403, with the spec's error body.
    const second = await free.api.post('/instance/create', { framework: 'openclaw' });
    expect(second.status).toBe(403);
    expect(second.body).toEqual({ error: expect.any(String), code: 'INSTANCE_LIMIT_EXCEEDED', status: 403 });

    // Usage feeds /subscription/status and /usage/metrics.
    await waitFor(
      'usage shows the instance',
      async () => {
        const st = await free.api.get('/subscription/status');
        const m = await free.api.get('/usage/metrics');
        return st.body.instances_used === 1 && m.body.instances?.active === 1 && m.body.instances.remaining === 0;
      },
      15_000,
      250,
    );

    expect((await free.api.post(`/instance/restart/${id}`)).body).toEqual({ success: true, instance_id: id, status: 'provisioning' });
    const d = await free.api.del(`/instance/delete/${id}`);
    expect(d.status).toBe(200);
    expect(d.body).toEqual({ success: true, instance_id: id, deleted_at: expect.any(String) });
    expect((await dockerTry('inspect', `agenthost-${id}`)).code).not.toBe(0);
    expect((await free.api.get(`/instance/status/${id}`)).status).toBe(404);
  });

  it("answers 404 for another user's instance on every route", async () => {
    const c = await pro.api.post('/instance/create', { framework: 'openclaw' });
    expect(c.status).toBe(200);
    const id = c.body.instance_id as string;
    for (const [method, path] of [
      ['get', `/instance/status/${id}`],
      ['post', `/instance/restart/${id}`],
      ['post', `/instance/stop/${id}`],
      ['post', `/instance/start/${id}`],
      ['del', `/instance/delete/${id}`],
      ['get', `/instance/logs/${id}`],
    ] as const) {
      const r = method === 'get' ? await free.api.get(path) : method === 'post' ? await free.api.post(path) : await free.api.del(path);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.body).toEqual({ error: expect.any(String), code: 'INSTANCE_NOT_FOUND', status: 404 });
    }
    expect((await pro.api.del(`/instance/delete/${id}`)).status).toBe(200);
  });

  it('refuses bad input with 400 naming the field, and callers without a subscription with 402', async () => {
    for (const [body, field] of [
      [{ framework: 'other' }, 'framework'],
      [{}, 'framework'],
      [{ framework: 'openclaw', version: 'nope-404' }, 'version'],
      [{ framework: 'openclaw', name: '' }, 'name'],
      [{ framework: 'openclaw', name: 42 }, 'name'],
    ] as const) {
      const r = await pro.api.post('/instance/create', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(r.body.error, JSON.stringify(body)).toMatch(new RegExp(`^${field}:`));
    }
    // user_id cannot be smuggled in the body.
    const smuggled = await pro.api.post('/instance/create', { framework: 'openclaw', user_id: free.user_id, tier: 'enterprise' });
    expect(smuggled.status).toBe(200);
    expect((await free.api.get(`/instance/status/${smuggled.body.instance_id}`)).status).toBe(404);
    expect((await pro.api.del(`/instance/delete/${smuggled.body.instance_id}`)).status).toBe(200);

    const nobody = await signIn(stack.api);
    const r = await nobody.api.post('/instance/create', { framework: 'openclaw' });
    expect(r.status).toBe(402);
    expect(r.body.code).toBe('SUBSCRIPTION_REQUIRED');
  });

  it('refuses new instances after the subscription is cancelled (403) but keeps access', async () => {
    const s = await signIn(stack.api);
    await subscribe(stack, s, { tier: 'pro' });
    const sent = await chainClient(stack).cancel(s.wallet);
    expect(sent.err).toBeNull();
    await s.api.post('/subscription/refresh');
    const r = await s.api.post('/instance/create', { framework: 'openclaw' });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('SUBSCRIPTION_CANCELLED');
    expect((await s.api.get('/instance/list')).status).toBe(200);
  });
});
