import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, afterAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { recordSecret, docker, newUser, provisionerEnv } from '@agenthost/testkit';
import { archiveKey, openArchive } from '../src/backups/archive.ts';
import { agentState, backupSuite, tokenOf } from './backup-helpers.ts';
import { s3Server } from './s3-server.ts';

// Backups kept in an S3-compatible bucket (BACKUP_S3_*) instead of the backup directory: a real S3 server over HTTP
// (s3rver), the stand-in agent on the Docker engine, the provisioner's own S3 client (AWS SDK v3).

const P = contracts.provisioner;
const small = { memory_mb: 256, cpus: 0.5, pids: 64 };
let s3: Awaited<ReturnType<typeof s3Server>>;
// Started before the suite's stack (hooks run in the order they are registered), so its settings exist by then.
beforeAll(async () => {
  s3 = await s3Server(19640);
});
afterAll(async () => {
  await s3?.remove();
});
const s = backupSuite('bks3', (network) => ({
  ...provisionerEnv({ network, ports: [19590, 19599], tiers: { free: small, pro: { ...small, backups_kept: 2 }, enterprise: small } }),
  ...s3.env,
}));

const objectOf = (backup_id: string) => `${s.network}/${backup_id}.bak`;

const { newInstance } = s;

describe('backups in an S3-compatible bucket', () => {
  it('backup → delete → restore through the bucket: the object is ciphertext, and the data comes back', async () => {
    const user_id = newUser();
    const a = await newInstance(user_id);
    const before = await agentState(a.port);
    const b = await s.n.call(P.backup, { user_id, instance_id: a.instance_id, tier: 'pro' });
    // The archive is an object of the bucket, not a file of the backup directory.
    expect(await s3.keys(`${s.network}/`)).toEqual([objectOf(b.backup_id)]);
    expect(await readdir(s.store.env.BACKUP_DIR)).toEqual([]);
    const object = await s3.get(objectOf(b.backup_id));
    expect(object.length).toBe(b.size_bytes);
    // Encrypted before upload: no tar in the clear, and the key is the instance's own (the header is AHBK).
    expect(object.subarray(0, 4).toString('latin1')).toBe('AHBK');
    expect(object.includes(Buffer.from('standin-state.json'))).toBe(false);
    // Opened with the instance's key, the object is the agent's files.
    const copy = join(s.store.env.BACKUP_DIR, 'downloaded.bak');
    await writeFile(copy, object);
    const plain: Buffer[] = [];
    for await (const c of await openArchive(
      copy,
      archiveKey(Buffer.from(s.store.env.BACKUP_KEY, 'base64'), { user_id, instance_id: a.instance_id, backup_id: b.backup_id }),
    ))
      plain.push(c as Buffer);
    await rm(copy);
    expect(Buffer.concat(plain).includes(Buffer.from('standin-state.json'))).toBe(true);

    // Restored in place: the instance gets its data back and a new token.
    const r = await s.n.call(P.restore, { user_id, instance_id: a.instance_id, backup_id: b.backup_id, tier: 'pro' });
    recordSecret(r.access_token);
    expect(r.access_token).not.toBe(a.access_token);
    await s.running(user_id, a.instance_id);
    expect((await agentState(a.port)).born).toBe(before.born);

    // Deleted, then restored into a new instance from the bucket.
    await s.n.call(P.remove, { user_id, instance_id: a.instance_id });
    const c = await s.n.call(P.clone, { user_id, tier: 'pro', instance_id: a.instance_id, backup_id: b.backup_id, name: 'from-s3' });
    recordSecret(c.access_token);
    expect(await tokenOf(c.instance_id)).toBe(c.access_token);
    await s.running(user_id, c.instance_id);
    expect((await agentState(c.port)).born).toBe(before.born);
    await s.n.call(P.remove, { user_id, instance_id: c.instance_id });
    await s.n.call(P.removeBackup, { user_id, instance_id: a.instance_id, backup_id: b.backup_id });
    expect(await s3.keys(`${s.network}/`)).toEqual([]);
  }, 240_000);

  it('a tampered or missing object is refused and nothing of the instance changes', async () => {
    const user_id = newUser();
    const a = await newInstance(user_id);
    const b = await s.n.call(P.backup, { user_id, instance_id: a.instance_id, tier: 'pro' });
    const containerBefore = await docker('inspect', '-f', '{{.Id}}', `agenthost-${a.instance_id}`);
    const object = await s3.get(objectOf(b.backup_id));
    object[Math.floor(object.length / 2)]! ^= 0x01;
    await s3.put(objectOf(b.backup_id), object);
    expect(await s.n.fail(P.restore, { user_id, instance_id: a.instance_id, backup_id: b.backup_id, tier: 'pro' })).toMatchObject({
      code: 'BACKUP_CORRUPT',
      status: 422,
    });
    expect(await s.n.fail(P.clone, { user_id, tier: 'pro', instance_id: a.instance_id, backup_id: b.backup_id })).toMatchObject({
      code: 'BACKUP_CORRUPT',
      status: 422,
    });
    await s3.del(objectOf(b.backup_id));
    expect(await s.n.fail(P.restore, { user_id, instance_id: a.instance_id, backup_id: b.backup_id, tier: 'pro' })).toMatchObject({
      code: 'BACKUP_CORRUPT',
      status: 422,
    });
    expect((await s.n.call(P.list, { user_id })).instances.map((i) => i.instance_id)).toEqual([a.instance_id]);
    expect(await docker('inspect', '-f', '{{.Id}}', `agenthost-${a.instance_id}`)).toBe(containerBefore);
    expect(await tokenOf(a.instance_id)).toBe(a.access_token);
    expect((await s.n.call(P.get, { user_id, instance_id: a.instance_id })).status).toBe('running');
    await s.n.call(P.removeBackup, { user_id, instance_id: a.instance_id, backup_id: b.backup_id });
    await s.n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 240_000);

  it("retention deletes the oldest objects past the tier's backups_kept, and a deleted backup's object goes", async () => {
    const user_id = newUser();
    const a = await newInstance(user_id);
    const taken = [];
    for (let i = 0; i < 3; i++) taken.push(await s.n.call(P.backup, { user_id, instance_id: a.instance_id, tier: 'pro' }));
    const [oldest, middle, newest] = taken.map((t) => t.backup_id) as [string, string, string];
    expect((await s.n.call(P.backups, { user_id, instance_id: a.instance_id })).backups.map((x) => x.backup_id)).toEqual([newest, middle]);
    // (The bucket's prefix is the suite's: only this test's objects are looked at.)
    const mine = async () => (await s3.keys(`${s.network}/`)).filter((k) => [oldest, middle, newest].some((id) => k === objectOf(id)));
    expect(await mine()).toEqual([objectOf(middle), objectOf(newest)].sort());
    await s.n.call(P.removeBackup, { user_id, instance_id: a.instance_id, backup_id: middle });
    expect(await mine()).toEqual([objectOf(newest)]);
    expect(await s.n.fail(P.restore, { user_id, instance_id: a.instance_id, backup_id: oldest, tier: 'pro' })).toMatchObject({ code: 'BACKUP_NOT_FOUND' });
    await s.n.call(P.removeBackup, { user_id, instance_id: a.instance_id, backup_id: newest });
    await s.n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 240_000);

  it('a bucket that cannot be reached is a 503 the client may retry, and no backup is recorded', async () => {
    const user_id = newUser();
    const a = await newInstance(user_id);
    await s3.stop();
    expect(await s.n.fail(P.backup, { user_id, instance_id: a.instance_id, tier: 'pro' })).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503 });
    expect((await s.n.call(P.backups, { user_id, instance_id: a.instance_id })).backups).toEqual([]);
    // The agent was resumed after the copy: still running.
    expect((await s.n.call(P.get, { user_id, instance_id: a.instance_id })).status).toBe('running');
    await s.n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 240_000);
});
