import { copyFile, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { eventHistory, recordSecret, docker, newUser, provisionerEnv } from '@agenthost/testkit';
import { agentState, backupSuite, tokenOf } from './backup-helpers.ts';

const P = contracts.provisioner;
const small = { memory_mb: 256, cpus: 0.5, pids: 64 };
const s = backupSuite('bk', (network) =>
  provisionerEnv({ network, ports: [18850, 18869], tiers: { free: small, pro: { ...small, backups_kept: 2 }, enterprise: { ...small, backups_kept: 0 } } }),
);

const archive = (backup_id: string) => s.store.archive(backup_id);

const { newInstance } = s;

describe('backups of an instance (stand-in agent)', () => {
  it('a backup survives the instance: deleted, then cloned into a new instance with the same data and its own token', async () => {
    const user_id = newUser();
    const a = await newInstance(user_id);
    const before = await agentState(a.port);
    const b = await s.n.call(P.backup, { user_id, instance_id: a.instance_id, tier: 'pro' });
    expect(b).toMatchObject({ instance_id: a.instance_id, kind: 'manual' });
    expect(b.size_bytes).toBeGreaterThan(0);
    // The agent was paused for the copy, not restarted: same boot, still serving.
    expect(await agentState(a.port)).toEqual(before);
    const events = await eventHistory(s.n.nc, P.instanceBackup.subject);
    expect(events.map((e) => (e as { backup_id: string }).backup_id)).toContain(b.backup_id);

    // The archive is encrypted (no tar in the clear) and, opened with its key, holds the agent's files but no credential.
    const raw = await readFile(archive(b.backup_id));
    expect(raw.includes(Buffer.from('standin-state.json'))).toBe(false);
    const plain = await s.store.plaintext({ user_id, instance_id: a.instance_id, backup_id: b.backup_id });
    expect(plain.includes(Buffer.from('standin-state.json'))).toBe(true);
    expect(plain.includes(Buffer.from(a.access_token!))).toBe(false);

    await s.n.call(P.remove, { user_id, instance_id: a.instance_id });
    // The deleted instance is still known by its backups, which still count toward storage.
    expect((await s.n.call(P.backups, { user_id, instance_id: a.instance_id })).backups.map((x) => x.backup_id)).toEqual([b.backup_id]);
    const usage = await s.n.call(P.usage, { user_id });
    expect(usage).toEqual({
      instances_active: 0,
      storage_used_mb: Math.round((b.size_bytes / 1024 / 1024) * 100) / 100,
      restarts: 0,
      oom_kills: 0,
      cpu_usage_percent: 0,
      memory_usage_mb: 0,
    });

    const c = await s.n.call(P.clone, { user_id, tier: 'pro', instance_id: a.instance_id, backup_id: b.backup_id, name: 'revived' });
    recordSecret(c.access_token);
    expect(c).toMatchObject({ name: 'revived', status: 'provisioning', cloned_from: a.instance_id, backup_id: b.backup_id });
    expect(c.instance_id).not.toBe(a.instance_id);
    expect(c.access_token).not.toBe(a.access_token);
    expect(await tokenOf(c.instance_id)).toBe(c.access_token);
    await s.running(user_id, c.instance_id);
    const after = await agentState(c.port);
    expect(after.born).toBe(before.born);
    expect(after.boots).toBe(before.boots + 1);
    await s.n.call(P.remove, { user_id, instance_id: c.instance_id });
  }, 180_000);

  it('a clone runs beside the original, with its own port and token', async () => {
    const user_id = newUser();
    const a = await newInstance(user_id);
    const b = await s.n.call(P.backup, { user_id, instance_id: a.instance_id, tier: 'pro' });
    const c = await s.n.call(P.clone, { user_id, tier: 'pro', instance_id: a.instance_id, backup_id: b.backup_id });
    await s.running(user_id, c.instance_id);
    expect(c.port).not.toBe(a.port);
    expect((await agentState(c.port)).born).toBe((await agentState(a.port)).born);
    expect(await tokenOf(a.instance_id)).toBe(a.access_token);
    expect(await tokenOf(c.instance_id)).toBe(c.access_token);
    expect((await s.n.call(P.get, { user_id, instance_id: a.instance_id })).status).toBe('running');
    // A clone counts against the tier like a create: the free tier's single instance is taken.
    const solo = newUser();
    const f = await newInstance(solo, 'free');
    const fb = await s.n.call(P.backup, { user_id: solo, instance_id: f.instance_id, tier: 'free' });
    expect(await s.n.fail(P.clone, { user_id: solo, tier: 'free', instance_id: f.instance_id, backup_id: fb.backup_id })).toMatchObject({
      code: 'INSTANCE_LIMIT_EXCEEDED',
      status: 403,
    });
    for (const [u, id] of [
      [user_id, a.instance_id],
      [user_id, c.instance_id],
      [solo, f.instance_id],
    ] as const)
      await s.n.call(P.remove, { user_id: u, instance_id: id });
  }, 180_000);

  it('a restore puts the data back, restarts the instance and rotates its access token', async () => {
    const user_id = newUser();
    const a = await newInstance(user_id);
    const b = await s.n.call(P.backup, { user_id, instance_id: a.instance_id, tier: 'pro' });
    const at = await agentState(a.port);
    await s.n.call(P.restart, { user_id, instance_id: a.instance_id, tier: 'pro' });
    await s.running(user_id, a.instance_id);
    expect((await agentState(a.port)).boots).toBe(at.boots + 1);

    const r = await s.n.call(P.restore, { user_id, instance_id: a.instance_id, backup_id: b.backup_id, tier: 'pro' });
    recordSecret(r.access_token);
    expect(r).toMatchObject({ success: true, instance_id: a.instance_id, status: 'provisioning', backup_id: b.backup_id });
    expect(r.access_token).not.toBe(a.access_token);
    expect(await tokenOf(a.instance_id)).toBe(r.access_token);
    await s.running(user_id, a.instance_id);
    // The state as backed up, started once more: the restart after the backup is undone.
    expect(await agentState(a.port)).toEqual({ born: at.born, boots: at.boots + 1 });
    await s.n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 180_000);

  it('a tampered archive is refused and nothing of the instance changes', async () => {
    const user_id = newUser();
    const a = await newInstance(user_id);
    const b = await s.n.call(P.backup, { user_id, instance_id: a.instance_id, tier: 'pro' });
    const containerBefore = await docker('inspect', '-f', '{{.Id}}', `agenthost-${a.instance_id}`);
    const file = await readFile(archive(b.backup_id));
    file[Math.floor(file.length / 2)]! ^= 0x01;
    await writeFile(archive(b.backup_id), file);
    expect(await s.n.fail(P.restore, { user_id, instance_id: a.instance_id, backup_id: b.backup_id, tier: 'pro' })).toMatchObject({
      code: 'BACKUP_CORRUPT',
      status: 422,
    });
    expect(await s.n.fail(P.clone, { user_id, tier: 'pro', instance_id: a.instance_id, backup_id: b.backup_id })).toMatchObject({
      code: 'BACKUP_CORRUPT',
      status: 422,
    });
    expect((await s.n.call(P.list, { user_id })).instances.map((i) => i.instance_id)).toEqual([a.instance_id]);
    expect(await docker('inspect', '-f', '{{.Id}}', `agenthost-${a.instance_id}`)).toBe(containerBefore);
    expect(await tokenOf(a.instance_id)).toBe(a.access_token);
    expect((await s.n.call(P.get, { user_id, instance_id: a.instance_id })).status).toBe('running');
    await s.n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 180_000);

  it("one user's backup cannot be listed, restored or cloned by another, not even as a file copied over their own", async () => {
    const alice = newUser();
    const bob = newUser();
    const a = await newInstance(alice);
    const m = await newInstance(bob);
    const ab = await s.n.call(P.backup, { user_id: alice, instance_id: a.instance_id, tier: 'pro' });
    const mb = await s.n.call(P.backup, { user_id: bob, instance_id: m.instance_id, tier: 'pro' });
    expect(await s.n.fail(P.backups, { user_id: bob, instance_id: a.instance_id })).toMatchObject({ code: 'INSTANCE_NOT_FOUND', status: 404 });
    expect(await s.n.fail(P.restore, { user_id: bob, instance_id: m.instance_id, backup_id: ab.backup_id, tier: 'pro' })).toMatchObject({
      code: 'BACKUP_NOT_FOUND',
      status: 404,
    });
    expect(await s.n.fail(P.clone, { user_id: bob, tier: 'pro', instance_id: a.instance_id, backup_id: ab.backup_id })).toMatchObject({
      code: 'BACKUP_NOT_FOUND',
      status: 404,
    });
    expect(await s.n.fail(P.removeBackup, { user_id: bob, instance_id: a.instance_id, backup_id: ab.backup_id })).toMatchObject({
      code: 'BACKUP_NOT_FOUND',
      status: 404,
    });
    expect(await s.n.fail(P.restore, { user_id: alice, instance_id: m.instance_id, backup_id: ab.backup_id, tier: 'pro' })).toMatchObject({
      code: 'INSTANCE_NOT_FOUND',
      status: 404,
    });
    // Alice's archive put in place of Bob's own backup: its key is bound to Alice, her instance and her backup.
    await copyFile(archive(ab.backup_id), archive(mb.backup_id));
    expect(await s.n.fail(P.restore, { user_id: bob, instance_id: m.instance_id, backup_id: mb.backup_id, tier: 'pro' })).toMatchObject({
      code: 'BACKUP_CORRUPT',
      status: 422,
    });
    expect((await agentState(m.port)).born).not.toBe((await agentState(a.port)).born);
    await s.n.call(P.remove, { user_id: alice, instance_id: a.instance_id });
    await s.n.call(P.remove, { user_id: bob, instance_id: m.instance_id });
  }, 180_000);

  it('each instance keeps its tier’s number of backups, the oldest dropped, and a deleted backup is gone', async () => {
    const user_id = newUser();
    const a = await newInstance(user_id);
    const taken = [];
    for (let i = 0; i < 3; i++) taken.push(await s.n.call(P.backup, { user_id, instance_id: a.instance_id, tier: 'pro' }));
    const kept = (await s.n.call(P.backups, { user_id, instance_id: a.instance_id })).backups;
    expect(kept.map((x) => x.backup_id)).toEqual([taken[2]!.backup_id, taken[1]!.backup_id]);
    const files = await readdir(dirname(archive(taken[0]!.backup_id)));
    expect(files).not.toContain(`${taken[0]!.backup_id}.bak`);
    expect(await s.n.fail(P.restore, { user_id, instance_id: a.instance_id, backup_id: taken[0]!.backup_id, tier: 'pro' })).toMatchObject({
      code: 'BACKUP_NOT_FOUND',
    });
    await s.n.call(P.removeBackup, { user_id, instance_id: a.instance_id, backup_id: taken[1]!.backup_id });
    expect((await s.n.call(P.backups, { user_id, instance_id: a.instance_id })).backups.map((x) => x.backup_id)).toEqual([taken[2]!.backup_id]);
    expect(await readdir(dirname(archive(taken[0]!.backup_id)))).not.toContain(`${taken[1]!.backup_id}.bak`);
    // A tier that keeps no backups takes none.
    expect(await s.n.fail(P.backup, { user_id, instance_id: a.instance_id, tier: 'enterprise' })).toMatchObject({
      code: 'STORAGE_LIMIT_EXCEEDED',
      status: 403,
    });
    await s.n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 180_000);
});
