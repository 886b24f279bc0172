import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, gatewayUrl, signIn, startStack, subscribe, type Session, type Stack } from '@agenthost/testkit';
import { cleanupDocker, gatewayEnv, provisionerEnv, testNetwork } from '../../provisioner/test/helpers.ts';

// Idempotency-Key on POST and DELETE, against the real provisioner and Docker and two gateway processes.

const network = testNetwork('idem');
let stack: Stack;
let alice: Session;

beforeAll(async () => {
  await cleanupDocker(network);
  stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    serviceEnv: { provisioner: provisionerEnv({ network, ports: [18970, 18979] }), gateway: gatewayEnv },
  });
  alice = await signIn(stack.api);
  await subscribe(stack, alice, { tier: 'pro' });
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  await cleanupDocker(network);
});

const key = () => `k-${crypto.randomUUID()}`;
const instances = async () => (await alice.api.get('/instance/list')).body.instances as Array<{ instance_id: string }>;

describe('Idempotency-Key', () => {
  it('ten concurrent creates with one key make one instance, and all ten get its answer', async () => {
    const k = key();
    const before = (await instances()).length;
    const rs = await Promise.all(Array.from({ length: 10 }, () => alice.api.post('/instance/create', { framework: 'openclaw', name: 'once' }, { 'idempotency-key': k })));
    expect(rs.map((r) => r.status)).toEqual(Array(10).fill(200));
    const ids = new Set(rs.map((r) => r.body.instance_id));
    expect(ids.size).toBe(1);
    expect(rs.filter((r) => r.headers.get('idempotency-replayed') === 'true')).toHaveLength(9);
    // The replays carry the first answer exactly, access token included (it was shown to the first caller).
    for (const r of rs) expect(r.body).toEqual(rs[0]!.body);
    const now = await instances();
    expect(now.length).toBe(before + 1);
    await alice.api.del(`/instance/delete/${[...ids][0]}`);
  });

  it('replays the first answer after the gateway that gave it was killed, from another gateway process', async () => {
    const k = key();
    const first = await stack.addReplica('gateway', 'gateway-idem-a');
    const a = apiClient(gatewayUrl(first), alice.token);
    const c = await a.post('/instance/create', { framework: 'openclaw' }, { 'idempotency-key': k });
    expect(c.status).toBe(200);
    expect(c.headers.get('idempotency-replayed')).toBeNull();
    await first.kill();
    const second = await stack.addReplica('gateway', 'gateway-idem-b');
    const b = apiClient(gatewayUrl(second), alice.token);
    const again = await b.post('/instance/create', { framework: 'openclaw' }, { 'idempotency-key': k });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.body).toEqual(c.body);
    // DELETE too: the second delete replays the first's answer instead of a 404.
    const dk = key();
    const d1 = await b.del(`/instance/delete/${c.body.instance_id}`, undefined, { 'idempotency-key': dk });
    const d2 = await alice.api.del(`/instance/delete/${c.body.instance_id}`, undefined, { 'idempotency-key': dk });
    expect(d1.status).toBe(200);
    expect(d2.status).toBe(200);
    expect(d2.body).toEqual(d1.body);
    expect(d2.headers.get('idempotency-replayed')).toBe('true');
    await second.kill();
  });

  it('refuses the same key with another body or path with 422 IDEMPOTENCY_KEY_REUSED, and keeps refusals', async () => {
    const k = key();
    const bad = await alice.api.post('/instance/create', { framework: 'nope' }, { 'idempotency-key': k });
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.status).toBeLessThan(500);
    const badAgain = await alice.api.post('/instance/create', { framework: 'nope' }, { 'idempotency-key': k });
    expect(badAgain.status).toBe(bad.status);
    expect(badAgain.body).toEqual(bad.body);
    expect(badAgain.headers.get('idempotency-replayed')).toBe('true');

    const other = await alice.api.post('/instance/create', { framework: 'openclaw' }, { 'idempotency-key': k });
    expect(other.status).toBe(422);
    expect(other.body).toEqual({ error: expect.any(String), code: 'IDEMPOTENCY_KEY_REUSED', status: 422 });
    expect((await alice.api.post('/instance/stop/inst-0000000000000000', { framework: 'nope' }, { 'idempotency-key': k })).body).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
    // Keys are per user: another user's same key is a new key.
    const bob = await signIn(stack.api);
    await subscribe(stack, bob, { tier: 'pro' });
    expect((await bob.api.post('/instance/create', { framework: 'nope' }, { 'idempotency-key': k })).headers.get('idempotency-replayed')).toBeNull();
    expect((await alice.api.post('/instance/create', { framework: 'openclaw' }, { 'idempotency-key': 'x'.repeat(256) })).body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
  });
});
