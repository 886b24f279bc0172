import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  recordSecret,
  signIn,
  startStack,
  subscribe,
  type Session,
  type Stack,
  cleanupDocker,
  gatewayEnv,
  provisionerEnv,
  testNetwork,
  waitFor,
} from '@agenthost/testkit';
import { backupStore, type BackupStore } from './backup-helpers.ts';

const network = testNetwork('bkhttp');

let stack: Stack;
let alice: Session;
let bob: Session;
let store: BackupStore;

beforeAll(async () => {
  await cleanupDocker(network);
  store = await backupStore(network);
  stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    serviceEnv: { provisioner: { ...provisionerEnv({ network, ports: [18885, 18894] }), ...store.env }, gateway: gatewayEnv },
  });
  alice = await signIn(stack.api);
  await subscribe(stack, alice, { tier: 'pro' });
  bob = await signIn(stack.api);
  await subscribe(stack, bob, { tier: 'pro' });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await cleanupDocker(network);
  await store?.remove();
});

const running = (s: Session, id: string) =>
  waitFor(`${id} running`, async () => (await s.api.get(`/instance/status/${id}`)).body.status === 'running', 60_000, 250);

describe('backups through the HTTP API', () => {
  it('backs up, lists, restores, clones and deletes backups for the owner only, with the error shape for bad input', async () => {
    const c = await alice.api.post('/instance/create', { framework: 'openclaw' });
    expect(c.status, c.text).toBe(200);
    recordSecret(c.body.access_token);
    const id = c.body.instance_id as string;
    await running(alice, id);

    const b = await alice.api.post(`/instance/backup/${id}`);
    expect(b.status, b.text).toBe(200);
    expect(b.body).toEqual({
      backup_id: expect.stringMatching(/^bk-/),
      instance_id: id,
      size_bytes: expect.any(Number),
      created_at: expect.any(String),
      kind: 'manual',
    });
    const list = await alice.api.get(`/instance/backups/${id}`);
    expect(list.body).toEqual({ instance_id: id, backups: [b.body] });

    // Another user: every verb is 404, as for their instances.
    const m = await bob.api.post('/instance/create', { framework: 'openclaw' });
    recordSecret(m.body.access_token);
    expect((await bob.api.get(`/instance/backups/${id}`)).body).toEqual({ error: expect.any(String), code: 'INSTANCE_NOT_FOUND', status: 404 });
    expect((await bob.api.post(`/instance/backup/${id}`)).status).toBe(404);
    expect((await bob.api.post(`/instance/restore/${m.body.instance_id}`, { backup_id: b.body.backup_id })).body).toEqual({
      error: expect.any(String),
      code: 'BACKUP_NOT_FOUND',
      status: 404,
    });
    expect((await bob.api.post(`/instance/clone/${id}`, { backup_id: b.body.backup_id })).body).toMatchObject({ code: 'BACKUP_NOT_FOUND', status: 404 });
    expect((await bob.api.del(`/instance/backup/${id}/${b.body.backup_id}`)).status).toBe(404);

    // Bad input is a 400 in the error shape, never a 500.
    expect((await alice.api.post(`/instance/restore/${id}`, {})).body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    expect((await alice.api.post(`/instance/restore/${id}`, { backup_id: '../../etc/passwd' })).body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    expect((await alice.api.del(`/instance/backup/${id}/nope`)).body).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });

    const r = await alice.api.post(`/instance/restore/${id}`, { backup_id: b.body.backup_id });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ success: true, instance_id: id, status: 'provisioning', backup_id: b.body.backup_id, access_token: expect.any(String) });
    recordSecret(r.body.access_token);
    expect(r.body.access_token).not.toBe(c.body.access_token);
    await running(alice, id);

    const k = await alice.api.post(`/instance/clone/${id}`, { backup_id: b.body.backup_id, name: 'twin' });
    expect(k.status, k.text).toBe(200);
    expect(k.body).toMatchObject({ name: 'twin', cloned_from: id, status: 'provisioning', access_token: expect.any(String) });
    recordSecret(k.body.access_token);
    await running(alice, k.body.instance_id);

    expect((await alice.api.del(`/instance/backup/${id}/${b.body.backup_id}`)).body).toEqual({ success: true, instance_id: id, backup_id: b.body.backup_id });
    expect((await alice.api.get(`/instance/backups/${id}`)).body.backups).toEqual([]);
    expect((await alice.api.post(`/instance/restore/${id}`, { backup_id: b.body.backup_id })).status).toBe(404);

    const doc = (await stack.api.get('/openapi.json')).body;
    // Bodies are named component schemas in the document.
    const schemaOf = (s: { $ref?: string }): { required?: string[]; properties: Record<string, unknown> } =>
      s.$ref ? doc.components.schemas[s.$ref.split('/').pop()!] : (s as never);
    expect(schemaOf(doc.paths['/instance/restore/{instanceId}'].post.requestBody.content['application/json'].schema).required).toEqual(['backup_id']);
    expect(Object.keys(schemaOf(doc.paths['/instance/clone/{instanceId}'].post.requestBody.content['application/json'].schema).properties).sort()).toEqual([
      'backup_id',
      'name',
    ]);
    for (const p of ['/instance/backup/{instanceId}', '/instance/backups/{instanceId}', '/instance/backup/{instanceId}/{backupId}'])
      expect(doc.paths, p).toHaveProperty(p);
  }, 240_000);
});
