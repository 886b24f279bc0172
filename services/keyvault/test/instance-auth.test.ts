import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openKey } from '@agenthost/instance-bootstrap/crypto';
import type { ServiceProcess, Session, Stack } from '@agenthost/testkit';
import { issue, newInstanceId, nextIp, retrieve, waitFor } from './helpers.ts';
import { expectNotLogged, startKeyvaultSuite, type KeyvaultSuite } from './suite.ts';

// How an instance proves who it is to fetch its keys: wrong secrets, rate limits per address and per instance, and
// credentials reissued when its container is recreated. Storing and owning keys is in keyvault.test.ts.
let suite: KeyvaultSuite;
let stack: Stack;
let nc: NatsConnection;
let alice: Session;
let bob: Session;
const remember = (label?: string): string => suite.remember(label);

beforeAll(async () => {
  suite = await startKeyvaultSuite();
  ({ stack, nc, alice, bob } = suite);
});
afterAll(() => suite?.stop());

describe('instance authentication', () => {
  it('refuses a wrong secret, and one instance’s secret with another’s id, with 401', async () => {
    const a = await issue(nc, alice.user_id);
    const b = await issue(nc, bob.user_id);
    await alice.api.post('/keys/store', { instance_id: a.instance_id, keys: { K: remember() } });
    const wrong = await retrieve(stack, a.instance_id, `${a.instance_secret.slice(0, -2)}xx`, nextIp());
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({ error: expect.any(String), code: 'INSTANCE_UNAUTHORIZED', status: 401 });
    expect((await retrieve(stack, a.instance_id, b.instance_secret, nextIp())).status).toBe(401);
    expect((await retrieve(stack, b.instance_id, a.instance_secret, nextIp())).status).toBe(401);
    expect((await retrieve(stack, newInstanceId(), a.instance_secret, nextIp())).status).toBe(401);
    expect((await stack.api.get('/keys/retrieve', { 'x-forwarded-for': nextIp() })).status).toBe(401);
    expect((await retrieve(stack, 'NOT AN ID', a.instance_secret, nextIp())).status).toBe(401);
    expect((await retrieve(stack, a.instance_id, 'x'.repeat(500), nextIp())).status).toBe(401);
    // A bearer token is no instance credential.
    expect((await alice.api.get('/keys/retrieve', { 'x-instance-id': a.instance_id, 'x-forwarded-for': nextIp() })).status).toBe(401);
    expect((await retrieve(stack, a.instance_id, a.instance_secret, nextIp())).status).toBe(200);
  });

  it('stops accepting the previous secret and key once new credentials are issued (container recreated)', async () => {
    const first = await issue(nc, alice.user_id);
    const value = remember('sk-epoch');
    await alice.api.post('/keys/store', { instance_id: first.instance_id, keys: { EPOCH_KEY: value } });
    const second = await issue(nc, alice.user_id, first.instance_id);
    expect(second.instance_secret).not.toBe(first.instance_secret);
    // A fresh key per issue: a key that leaked dies with the restart.
    expect(second.instance_key).not.toBe(first.instance_key);
    expect((await retrieve(stack, first.instance_id, first.instance_secret, nextIp())).status).toBe(401);
    const got = await retrieve(stack, first.instance_id, second.instance_secret, nextIp());
    expect(got.status).toBe(200);
    const sealed = got.body.keys.EPOCH_KEY as string;
    expect(openKey({ instanceKey: second.instance_key, instanceId: first.instance_id, keyName: 'EPOCH_KEY', sealed })).toBe(value);
    expect(() => openKey({ instanceKey: first.instance_key, instanceId: first.instance_id, keyName: 'EPOCH_KEY', sealed })).toThrow();
  });

  it('gives 429 with Retry-After after repeated failures from one address', async () => {
    const ip = nextIp();
    const inst = await issue(nc, alice.user_id);
    for (let i = 0; i < 5; i++) expect((await retrieve(stack, inst.instance_id, 'ahis_wrong-secret-guess', ip)).status).toBe(401);
    const limited = await retrieve(stack, newInstanceId(), 'ahis_wrong-secret-guess', ip);
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe('RATE_LIMITED');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(limited.headers.get('retry-after'))).toBeLessThanOrEqual(120);
    // Even the right secret waits while its address is blocked; other addresses are unaffected.
    expect((await retrieve(stack, inst.instance_id, inst.instance_secret, ip)).status).toBe(429);
    expect((await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp())).status).toBe(200);
  });

  it('refuses wrong secrets for one instance from many addresses with 429, and the right secret still gets its keys', async () => {
    const inst = await issue(nc, alice.user_id);
    await alice.api.post('/keys/store', { instance_id: inst.instance_id, keys: { FLOOD_KEY: remember() } });
    for (let i = 0; i < 8; i++) expect((await retrieve(stack, inst.instance_id, `ahis_guess-number-${i}`, nextIp())).status).toBe(401);
    // The flood goes on from ever new addresses: every further guess is refused...
    const flood = await Promise.all(Array.from({ length: 30 }, (_, i) => retrieve(stack, inst.instance_id, `ahis_flood-${i}`, nextIp())));
    expect(new Set(flood.map((r) => r.status))).toEqual(new Set([429]));
    // ...while the instance, with its right secret, is never locked out of its keys.
    for (let i = 0; i < 3; i++) {
      const own = await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp());
      expect(own.status).toBe(200);
      expect(Object.keys(own.body.keys)).toEqual(['FLOOD_KEY']);
    }
  });

  it('counts and logs each failure without the presented secret', async () => {
    const inst = await issue(nc, alice.user_id);
    const guess = remember('ahis_guess');
    await retrieve(stack, inst.instance_id, guess, nextIp());
    const failures = () =>
      stack.services
        .get('keyvault')!
        .lines()
        .filter((l) => l.includes('"instance_auth_failed"'));
    const mine = await waitFor('the failure log line', async () => {
      const m = failures().filter((l) => l.includes(inst.instance_id));
      return m.length > 0 ? m : undefined;
    });
    const lines = failures();
    expect(mine).toHaveLength(1);
    expect(JSON.parse(mine[0]!)).toMatchObject({
      reason: 'wrong_secret',
      instance_id: inst.instance_id,
      failures_instance: 1,
      failures_total: expect.any(Number),
    });
    for (const l of lines) expect(l).not.toContain(guess);
  });

  it('does not count instance calls against the owner’s daily quota', async () => {
    const inst = await issue(nc, alice.user_id);
    const before = Number((await alice.api.get(`/keys/list?instance_id=${inst.instance_id}`)).headers.get('x-usage-remaining'));
    for (let i = 0; i < 5; i++) expect((await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp())).status).toBe(200);
    const after = Number((await alice.api.get(`/keys/list?instance_id=${inst.instance_id}`)).headers.get('x-usage-remaining'));
    expect(before - after).toBe(1); // only the owner's second list call counted
  });
});

describe('instance authentication across keyvault replicas', () => {
  it('counts one budget per address in the database: a second process goes on from the first one’s count', async () => {
    const first = stack.services.get('keyvault')!;
    const second = await stack.addReplica('keyvault', 'keyvault-b');
    const ip = nextIp();
    const inst = await issue(nc, alice.user_id);
    const fail = () => retrieve(stack, inst.instance_id, 'ahis_wrong-secret-guess', ip);
    // The address's count as each process logged it with its failures (lines arrive through a pipe, maybe after the reply).
    const counts = (p: ServiceProcess, n: number) =>
      waitFor(`${n} failure lines of the ${p === first ? 'first' : 'second'} process`, async () => {
        const c = p
          .lines()
          .filter((l) => l.includes('"instance_auth_failed"') && l.includes(`"ip":"${ip}"`))
          .map((l) => (JSON.parse(l) as { failures_ip: number }).failures_ip);
        return c.length >= n ? c : undefined;
      });
    let firstStopped = false;
    try {
      // Only the second process answers (a stopped one leaves the queue group): three of the five failures...
      await first.stop();
      firstStopped = true;
      for (let i = 0; i < 3; i++) expect((await fail()).status).toBe(401);
      expect(await counts(second, 3)).toEqual([1, 2, 3]);
      // ...then only the first, started again: it counts on from 3, and refuses the address after its fifth.
      await first.start();
      firstStopped = false;
      await second.stop();
      for (let i = 0; i < 2; i++) expect((await fail()).status).toBe(401);
      const limited = await fail();
      expect(limited.status).toBe(429);
      expect(limited.body).toEqual({ error: expect.any(String), code: 'RATE_LIMITED', status: 429 });
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await counts(first, 2)).toEqual([4, 5]);
    } finally {
      // The tests after this one run against the stack's own keyvault process alone.
      if (firstStopped) await first.start();
      await second.stop();
    }
  });
});

describe('logs', () => {
  it('never hold a value, a secret or an instance key presented in the tests above', async () => {
    const inst = await issue(nc, alice.user_id);
    await alice.api.post('/keys/store', { instance_id: inst.instance_id, keys: { LAST_KEY: remember() } });
    await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp());
    await expectNotLogged(stack, `"keys_retrieved","instance_id":"${inst.instance_id}"`, [...suite.values, inst.instance_secret, inst.instance_key]);
  });
});
