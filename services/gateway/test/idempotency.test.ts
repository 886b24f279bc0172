import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { apiClient, gatewayUrl, type Session, type Stack, waitFor, instanceStack } from '@agenthost/testkit';

// Idempotency-Key on POST and DELETE, against the real provisioner and Docker and several gateway processes.

/** A key unanswered this long is taken for one whose gateway died (short here so the crash test is quick). */
const IN_FLIGHT_SECONDS = 15;
let sys: Awaited<ReturnType<typeof instanceStack>>;
let stack: Stack;
let admin: pg.Client;
let alice: Session;

beforeAll(async () => {
  sys = await instanceStack('idem', [18970, 18979], { IDEMPOTENCY_IN_FLIGHT_SECONDS: String(IN_FLIGHT_SECONDS) });
  stack = sys.stack;
  admin = new pg.Client({ connectionString: stack.db.url });
  await admin.connect();
  alice = await sys.subscriber();
}, 240_000);

afterAll(async () => {
  await admin?.end();
  await sys?.stop();
});

const key = () => `k-${crypto.randomUUID()}`;
const instances = async () => (await alice.api.get('/instance/list')).body.instances as Array<{ instance_id: string }>;

describe('Idempotency-Key', () => {
  it('ten concurrent creates with one key make one instance, and all ten get its answer', async () => {
    const k = key();
    const before = (await instances()).length;
    const rs = await Promise.all(
      Array.from({ length: 10 }, () => alice.api.post('/instance/create', { framework: 'openclaw', name: 'once' }, { 'idempotency-key': k })),
    );
    expect(rs.map((r) => r.status)).toEqual(Array(10).fill(200));
    const ids = new Set(rs.map((r) => r.body.instance_id));
    expect(ids.size).toBe(1);
    expect(rs.filter((r) => r.headers.get('idempotency-replayed') === 'true')).toHaveLength(9);
    // The replays carry the first answer exactly, access token included (it was shown to the first caller).
    for (const r of rs) expect(r.body).toEqual(rs[0]!.body);
    // The kept answer is sealed at rest: the access token it holds is nowhere in the gateway's table.
    const token = rs[0]!.body.access_token as string;
    expect(token).toBeTruthy();
    const kept = await admin.query('SELECT body::text AS body FROM gateway.idempotency_keys WHERE key = $1', [k]);
    expect(kept.rows).toHaveLength(1);
    expect(kept.rows[0].body).not.toContain(token);
    expect(kept.rows[0].body).not.toContain(rs[0]!.body.instance_id);
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
    expect((await alice.api.post('/instance/stop/inst-0000000000000000', { framework: 'nope' }, { 'idempotency-key': k })).body).toMatchObject({
      code: 'IDEMPOTENCY_KEY_REUSED',
    });
    // Keys are per user: another user's same key is a new key.
    const bob = await sys.subscriber();
    expect((await bob.api.post('/instance/create', { framework: 'nope' }, { 'idempotency-key': k })).headers.get('idempotency-replayed')).toBeNull();
    expect((await alice.api.post('/instance/create', { framework: 'openclaw' }, { 'idempotency-key': 'x'.repeat(256) })).body).toMatchObject({
      code: 'VALIDATION_FAILED',
      status: 400,
    });
  });

  it('a create retried after its gateway died mid-request never makes a second instance', async () => {
    const k = key();
    const before = (await instances()).length;
    const victim = await stack.addReplica('gateway', 'gateway-idem-victim');
    const first = apiClient(gatewayUrl(victim), alice.token)
      .post('/instance/create', { framework: 'openclaw' }, { 'idempotency-key': k })
      .catch(() => 'connection lost' as const);
    // Killed once the key is recorded, i.e. while the create is forwarded (a create takes hundreds of ms).
    await waitFor(
      'the key is recorded',
      async () => (await admin.query('select 1 from gateway.idempotency_keys where key = $1', [k])).rowCount === 1,
      10_000,
      5,
    );
    await victim.kill();
    const lost = await first;
    const retry = await alice.api.post('/instance/create', { framework: 'openclaw' }, { 'idempotency-key': k });
    if (lost === 'connection lost') {
      // The outcome is unknown to every gateway: the retry is refused, never run again.
      expect(retry.status).toBe(409);
      expect(retry.body).toEqual({ error: expect.stringMatching(/outcome is unknown/), code: 'IDEMPOTENCY_KEY_IN_FLIGHT', status: 409 });
    } else {
      expect(retry.body).toEqual(lost.body); // the answer got out before the kill: replayed
    }
    // Whatever the provisioner did with the first create, there is at most one new instance, and a later retry agrees.
    await waitFor('the first create settled', async () => (await instances()).every((i) => (i as { status?: string }).status !== 'provisioning'), 60_000, 250);
    const made = (await instances()).length - before;
    expect(made).toBeLessThanOrEqual(1);
    expect((await alice.api.post('/instance/create', { framework: 'openclaw' }, { 'idempotency-key': k })).status).toBe(retry.status);
    expect((await instances()).length - before).toBe(made);
    console.log(
      `[idempotency] gateway killed mid-create: first ${lost === 'connection lost' ? 'lost' : 'answered'}, retry ${retry.status}, instances made ${made}`,
    );
  });
});
