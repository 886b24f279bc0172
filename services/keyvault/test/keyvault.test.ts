import type { NatsConnection } from 'nats';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openKey } from '@agenthost/instance-bootstrap/crypto';
import { contracts, publishEvent } from '@agenthost/shared';
import { apiClient, spawnService, type Session, type Stack } from '@agenthost/testkit';
import { issue, newInstanceId, nextIp, retrieve, waitFor } from './helpers.ts';
import { expectNotLogged, startKeyvaultSuite, type KeyvaultSuite } from './suite.ts';

// Instance authentication (wrong secrets, rate limits, reissued credentials) is in instance-auth.test.ts.
let suite: KeyvaultSuite;
let stack: Stack;
let nc: NatsConnection;
let db: pg.Client;
let alice: Session;
let bob: Session;
const remember = (label?: string): string => suite.remember(label);

beforeAll(async () => {
  suite = await startKeyvaultSuite();
  ({ stack, nc, db, alice, bob } = suite);
});
afterAll(() => suite?.stop());

describe('storing keys and retrieving them from the instance', () => {
  it('stores several keys in one call and the instance opens each with its own instance key', async () => {
    const inst = await issue(nc, alice.user_id);
    const keys = { OPENAI_API_KEY: remember('sk-openai'), ANTHROPIC_API_KEY: remember('sk-ant') };
    const stored = await alice.api.post('/keys/store', { instance_id: inst.instance_id, keys });
    expect(stored.status).toBe(200);
    expect(stored.body).toEqual({ success: true, keys_stored: 2, instance_id: inst.instance_id, applied: false, reason: 'instance not running' });

    const got = await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp());
    expect(got.status).toBe(200);
    expect(got.headers.get('cache-control')).toBe('no-store');
    expect(Object.keys(got.body.keys).sort()).toEqual(['ANTHROPIC_API_KEY', 'OPENAI_API_KEY']);
    for (const [name, sealed] of Object.entries(got.body.keys as Record<string, string>)) {
      expect(JSON.parse(sealed)).toEqual({
        encrypted: expect.stringMatching(/^[0-9a-f]+$/),
        iv: expect.stringMatching(/^[0-9a-f]{24}$/),
        authTag: expect.stringMatching(/^[0-9a-f]{32}$/),
        kid: 'k1',
      });
      expect(openKey({ instanceKey: inst.instance_key, instanceId: inst.instance_id, keyName: name, sealed })).toBe(keys[name as keyof typeof keys]);
    }
    for (const v of Object.values(keys)) expect(got.text).not.toContain(v);
  });

  it('lists names and dates only, replaces a value on update, and deletes by name', async () => {
    const inst = await issue(nc, alice.user_id);
    const first = remember();
    const second = remember();
    await alice.api.post('/keys/store', { instance_id: inst.instance_id, keys: { A_KEY: first, B_KEY: remember() } });
    const listed = await alice.api.get(`/keys/list?instance_id=${inst.instance_id}`);
    expect(listed.status).toBe(200);
    expect(listed.body.keys.map((k: { key_name: string }) => k.key_name)).toEqual(['A_KEY', 'B_KEY']);
    expect(Object.keys(listed.body.keys[0]).sort()).toEqual(['created_at', 'key_name', 'updated_at']);
    expect(listed.text).not.toContain(first);

    const upd = await alice.api.put('/keys/update', { instance_id: inst.instance_id, key_name: 'A_KEY', key_value: second });
    expect(upd.status).toBe(200);
    expect(upd.body).toEqual({
      success: true,
      instance_id: inst.instance_id,
      key_name: 'A_KEY',
      restart_required: true,
      applied: false,
      reason: 'instance not running',
    });
    const got = await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp());
    expect(openKey({ instanceKey: inst.instance_key, instanceId: inst.instance_id, keyName: 'A_KEY', sealed: got.body.keys.A_KEY })).toBe(second);

    const missing = await alice.api.put('/keys/update', { instance_id: inst.instance_id, key_name: 'NOPE', key_value: remember() });
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('KEY_NOT_FOUND');

    const del = await alice.api.del('/keys/delete', { instance_id: inst.instance_id, key_names: ['A_KEY', 'NOT_THERE'] });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ success: true, instance_id: inst.instance_id, keys_deleted: 1, applied: false, reason: 'instance not running' });
    const after = await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp());
    expect(Object.keys(after.body.keys)).toEqual(['B_KEY']);
  });

  it('keeps only ciphertext in the database, bound to the row’s instance and key name', async () => {
    const inst = await issue(nc, alice.user_id);
    const v = remember();
    await alice.api.post('/keys/store', { instance_id: inst.instance_id, keys: { DB_CHECK: v } });
    const { rows } = await db.query('select * from api_keys where instance_id = $1', [inst.instance_id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].user_id).toBe(alice.user_id);
    expect(rows[0].kid).toBe('k1');
    expect(Object.keys(JSON.parse(rows[0].encrypted_value)).sort()).toEqual(['authTag', 'encrypted', 'iv', 'kid']);
    const dump =
      JSON.stringify((await db.query('select * from api_keys')).rows) +
      JSON.stringify((await db.query('select * from instances')).rows) +
      JSON.stringify((await db.query('select * from audit_log')).rows);
    for (const s of [...suite.values, inst.instance_secret, inst.instance_key]) expect(dump).not.toContain(s);
    const { rows: creds } = await db.query('select encode(secret_hash, $2) as h from instances where instance_id = $1', [inst.instance_id, 'hex']);
    expect(creds[0].h).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses bad names, reserved names, oversized values and too many keys with 400s', async () => {
    const inst = await issue(nc, alice.user_id);
    const store = (keys: Record<string, string>) => alice.api.post('/keys/store', { instance_id: inst.instance_id, keys });
    for (const keys of [
      { '1BAD': 'x'.repeat(10) },
      { 'HAS-DASH': 'x'.repeat(10) },
      { ['A'.repeat(101)]: 'x'.repeat(10) },
      { AGENTHOST_INSTANCE_SECRET: 'x'.repeat(10) },
      { EMPTY: '' },
      {},
    ] as Record<string, string>[]) {
      const res = await store(keys);
      expect(res.status, JSON.stringify(Object.keys(keys))).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    expect((await store({ BIG: 'x'.repeat(8193) })).status).toBe(400);
    expect((await store({ BIG_UTF8: 'é'.repeat(4097) })).status).toBe(400);
    expect((await store({ NUL: 'abc\0def' })).status).toBe(400);
    expect((await store({ ['A'.repeat(100)]: 'x'.repeat(8192) })).status).toBe(200);
    const fiftyOne = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`K${i}`, `v${i}-xxxxxx`]));
    expect((await store(fiftyOne)).body.code).toBe('VALIDATION_FAILED');
    const fifty = (from: number) => Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`K${from + i}`, `v${i}-xxxxxx`]));
    expect((await store(fifty(0))).status).toBe(200);
    expect((await store(fifty(50))).status).toBe(400);
    const over = await store(fifty(50));
    expect(over.body.code).toBe('KEY_LIMIT_EXCEEDED');
    expect((await store(fifty(49))).status).toBe(200); // 1 already there (A...A) + 99 = 100
    expect((await alice.api.get(`/keys/list?instance_id=${inst.instance_id}`)).body.keys).toHaveLength(100);
  });
});

describe('ownership', () => {
  it('answers 404 for another user’s instance on store, update, delete, list and audit', async () => {
    const inst = await issue(nc, alice.user_id);
    const v = remember();
    await alice.api.post('/keys/store', { instance_id: inst.instance_id, keys: { MINE: v } });
    const id = inst.instance_id;
    const attempts = [
      await bob.api.post('/keys/store', { instance_id: id, keys: { MINE: remember() } }),
      await bob.api.put('/keys/update', { instance_id: id, key_name: 'MINE', key_value: remember() }),
      await bob.api.del('/keys/delete', { instance_id: id, key_names: ['MINE'] }),
      await bob.api.get(`/keys/list?instance_id=${id}`),
      await bob.api.get(`/keys/audit?instance_id=${id}`),
    ];
    for (const r of attempts) expect(r.body).toEqual({ error: expect.any(String), code: 'INSTANCE_NOT_FOUND', status: 404 });
    const got = await retrieve(stack, id, inst.instance_secret, nextIp());
    expect(openKey({ instanceKey: inst.instance_key, instanceId: id, keyName: 'MINE', sealed: got.body.keys.MINE })).toBe(v);
  });

  it('answers 404 for an instance that was never issued credentials', async () => {
    expect((await alice.api.post('/keys/store', { instance_id: newInstanceId(), keys: { K: remember() } })).status).toBe(404);
    expect((await alice.api.get(`/keys/list?instance_id=${newInstanceId()}`)).status).toBe(404);
  });

  it('refuses to issue credentials for an instance id owned by another user', async () => {
    const inst = await issue(nc, alice.user_id);
    await expect(issue(nc, bob.user_id, inst.instance_id)).rejects.toMatchObject({ code: 'CONFLICT' });
  });

  it('requires a signed-in user for owner routes', async () => {
    expect((await stack.api.get(`/keys/list?instance_id=${newInstanceId()}`)).status).toBe(401);
    expect((await stack.api.post('/keys/store', { instance_id: newInstanceId(), keys: { K: 'x'.repeat(10) } })).status).toBe(401);
  });
});

describe('audit', () => {
  it('records store, update, delete and retrieve with ip and user agent, metadata only, for the owner', async () => {
    const inst = await issue(nc, alice.user_id);
    const id = inst.instance_id;
    const ua = { 'user-agent': 'keyvault-test/1.0', 'x-forwarded-for': '203.0.113.7' };
    const v1 = remember();
    const v2 = remember();
    await alice.api.post('/keys/store', { instance_id: id, keys: { AUDIT_ONE: v1, AUDIT_TWO: remember() } }, ua);
    await alice.api.put('/keys/update', { instance_id: id, key_name: 'AUDIT_ONE', key_value: v2 }, ua);
    await retrieve(stack, id, inst.instance_secret, '198.51.100.9', 'agenthost-bootstrap/1');
    await alice.api.del('/keys/delete', { instance_id: id, key_names: ['AUDIT_TWO'] }, ua);

    const res = await alice.api.get(`/keys/audit?instance_id=${id}&limit=50`);
    expect(res.status).toBe(200);
    const records = res.body.records as Array<Record<string, unknown>>;
    const summary = records.map((r) => `${r.action}:${r.key_name}`).reverse();
    expect(summary.slice(0, 3)).toEqual(['key_stored:AUDIT_ONE', 'key_stored:AUDIT_TWO', 'key_updated:AUDIT_ONE']);
    expect(summary.slice(3, 5).sort()).toEqual(['key_retrieved:AUDIT_ONE', 'key_retrieved:AUDIT_TWO']);
    expect(summary[5]).toBe('key_deleted:AUDIT_TWO');
    for (const r of records) {
      expect(Object.keys(r).sort()).toEqual(['action', 'instance_id', 'ip_address', 'key_length', 'key_name', 'timestamp', 'user_agent', 'user_id']);
      expect(r.user_id).toBe(alice.user_id);
      expect(r.instance_id).toBe(id);
      expect(Number.isNaN(Date.parse(r.timestamp as string))).toBe(false);
    }
    const byAction = (a: string) => records.find((r) => r.action === a)!;
    expect(byAction('key_stored')).toMatchObject({ ip_address: '203.0.113.7', user_agent: 'keyvault-test/1.0' });
    expect(byAction('key_updated')).toMatchObject({ key_length: v2.length, ip_address: '203.0.113.7' });
    expect(byAction('key_retrieved')).toMatchObject({ ip_address: '198.51.100.9', user_agent: 'agenthost-bootstrap/1' });
    for (const s of [v1, v2, inst.instance_secret, inst.instance_key]) expect(res.text).not.toContain(s);

    expect((await alice.api.get(`/keys/audit?instance_id=${id}&limit=2`)).body.records).toHaveLength(2);
    expect((await alice.api.get(`/keys/audit?instance_id=${id}&limit=0`)).status).toBe(400);
  });

  it('ignores a spoofed X-Forwarded-For at a gateway that trusts no proxy (the default)', async () => {
    const untrusting = await spawnService('gateway', {
      env: { ...stack.envFor('gateway'), GATEWAY_HOST: '127.0.0.1', GATEWAY_PORT: '0', TRUSTED_PROXIES: '' },
      label: 'gateway-noproxy',
    });
    try {
      const inst = await issue(nc, alice.user_id);
      const direct = apiClient(`${String(untrusting.ready.url)}/api`, alice.token);
      const stored = await direct.post(
        '/keys/store',
        { instance_id: inst.instance_id, keys: { SPOOF_KEY: remember() } },
        { 'x-forwarded-for': '203.0.113.66' },
      );
      expect(stored.status).toBe(200);
      const audit = await alice.api.get(`/keys/audit?instance_id=${inst.instance_id}`);
      const record = (audit.body.records as Array<{ action: string; ip_address: string }>).find((r) => r.action === 'key_stored')!;
      expect(record.ip_address).not.toBe('203.0.113.66');
      expect(record.ip_address).toMatch(/127\.0\.0\.1$/);
    } finally {
      await untrusting.stop();
    }
  });
});

describe('instance deletion', () => {
  it('removes keys and credentials when the instance is deleted, even if keyvault was down at that moment', async () => {
    const inst = await issue(nc, alice.user_id);
    await alice.api.post('/keys/store', { instance_id: inst.instance_id, keys: { GONE_ONE: remember(), GONE_TWO: remember() } });
    const keyvault = stack.services.get('keyvault')!;
    await keyvault.stop();
    await publishEvent(nc, contracts.provisioner.instanceDeleted, {
      instance_id: inst.instance_id,
      user_id: alice.user_id,
      deleted_at: new Date().toISOString(),
    });
    // Still there while keyvault is down.
    expect((await db.query('select count(*)::int as n from api_keys where instance_id = $1', [inst.instance_id])).rows[0].n).toBe(2);
    await keyvault.start();
    await waitFor('keys to be purged', async () => (await db.query('select 1 from instances where instance_id = $1', [inst.instance_id])).rowCount === 0);
    expect((await db.query('select count(*)::int as n from api_keys where instance_id = $1', [inst.instance_id])).rows[0].n).toBe(0);
    expect((await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp())).status).toBe(401);
    expect((await alice.api.get(`/keys/list?instance_id=${inst.instance_id}`)).status).toBe(404);
    const { rows } = await db.query('select action, key_name from audit_log where instance_id = $1 and action = $2 order by key_name', [
      inst.instance_id,
      'key_deleted',
    ]);
    expect(rows).toEqual([
      { action: 'key_deleted', key_name: 'GONE_ONE' },
      { action: 'key_deleted', key_name: 'GONE_TWO' },
    ]);
  });
});

describe('logs', () => {
  it('hold key names and last-4 hints but never a value, secret or instance key', async () => {
    const inst = await issue(nc, alice.user_id);
    const v = remember();
    await alice.api.post('/keys/store', { instance_id: inst.instance_id, keys: { LOGGED_NAME: v } });
    await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp());
    const all = await expectNotLogged(stack, `"keys_retrieved","instance_id":"${inst.instance_id}"`, [
      ...suite.values,
      inst.instance_secret,
      inst.instance_key,
    ]);
    expect(all).toContain('LOGGED_NAME');
    expect(all).toContain(`…${v.slice(-4)}`);
  });
});
