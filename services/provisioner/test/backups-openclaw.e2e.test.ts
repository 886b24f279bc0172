import { randomBytes } from 'node:crypto';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { recordSecret, repoRoot, docker, dockerTry, newUser, provisionerEnv } from '@agenthost/testkit';
import { backupSuite, tokenOf } from './backup-helpers.ts';

const P = contracts.provisioner;
/** OpenClaw's workspace on the state volume (HOME=/data/home). */
const WORKSPACE = '/data/home/.openclaw/workspace';
/**
 * The OpenClaw image with this checkout's launcher (deploy/images/openclaw/launch.mjs), which makes restored state
 * start at once: an image built before it would wait out the backed-up gateway lease. A fresh build is the same.
 */
const VERSION = 't-backup';
beforeAll(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ah-openclaw-'));
  await copyFile(join(repoRoot, 'deploy/images/openclaw/launch.mjs'), join(dir, 'launch.mjs'));
  await writeFile(
    join(dir, 'Dockerfile'),
    'FROM agenthost/openclaw:latest\nCOPY launch.mjs /opt/agenthost/openclaw/launch.mjs\nLABEL agenthost.test=variant\n',
  );
  await docker('build', '-q', '-t', `agenthost/openclaw:${VERSION}`, dir);
  await rm(dir, { recursive: true, force: true });
});
afterAll(async () => void (await dockerTry('rmi', `agenthost/openclaw:${VERSION}`)));

const s = backupSuite('bkoc', (network) => {
  const env = provisionerEnv({ network, ports: [18870, 18879] });
  // The real image map and tier resources (OpenClaw needs more than the stand-in's test limits).
  delete env.FRAMEWORK_IMAGES;
  delete env.TIER_LIMITS_JSON;
  return { ...env, READY_TIMEOUT_SECONDS: '300', DEFAULT_VERSION: VERSION };
});

/** A file in the agent's workspace, as the agent itself would write and read it (its user, its volume). */
const writeNote = (id: string, text: string) =>
  docker(
    'exec',
    '-u',
    '10001:10001',
    `agenthost-${id}`,
    '/usr/local/bin/node',
    '-e',
    `const fs=require('fs');fs.mkdirSync('${WORKSPACE}',{recursive:true});fs.writeFileSync('${WORKSPACE}/NOTE.md',process.argv[1])`,
    text,
  );
const readNote = (id: string) => docker('exec', '-u', '10001:10001', `agenthost-${id}`, 'cat', `${WORKSPACE}/NOTE.md`);
const archive = (backup_id: string) => s.store.archive(backup_id);

describe('backups of the real OpenClaw agent', () => {
  it('a workspace file survives backup → delete → restore into a new instance; a clone runs beside the original; a restore rolls the workspace back; tampered and foreign archives are refused', async () => {
    const user_id = newUser();
    const note = `remember ${randomBytes(8).toString('hex')}`;
    const a = await s.n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    recordSecret(a.access_token!);
    await s.running(user_id, a.instance_id, 300_000);
    await writeNote(a.instance_id, note);

    const b = await s.n.call(P.backup, { user_id, instance_id: a.instance_id, tier: 'pro' });
    expect(b.size_bytes).toBeGreaterThan(0);
    // Paused for the copy, never stopped: it still answers.
    expect((await fetch(`http://127.0.0.1:${a.port}/healthz`)).status).toBe(200);
    // The archive holds OpenClaw's state and the workspace, and no agenthost credential.
    const plain = await s.store.plaintext({ user_id, instance_id: a.instance_id, backup_id: b.backup_id });
    expect(plain.includes(Buffer.from('openclaw.json'))).toBe(true);
    expect(plain.includes(Buffer.from(note))).toBe(true);
    expect(plain.includes(Buffer.from(a.access_token!))).toBe(false);

    // A clone beside the original: its own port and token, the same workspace, both running.
    const c = await s.n.call(P.clone, { user_id, tier: 'pro', instance_id: a.instance_id, backup_id: b.backup_id });
    recordSecret(c.access_token);
    await s.running(user_id, c.instance_id, 300_000);
    expect(c.port).not.toBe(a.port);
    expect(c.access_token).not.toBe(a.access_token);
    expect(await tokenOf(c.instance_id)).toBe(c.access_token);
    expect(await tokenOf(a.instance_id)).toBe(a.access_token);
    expect(await readNote(c.instance_id)).toBe(note);
    for (const port of [a.port, c.port]) expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect((await s.n.call(P.get, { user_id, instance_id: a.instance_id })).status).toBe('running');
    await s.n.call(P.remove, { user_id, instance_id: c.instance_id });

    // The original deleted: its backup restores into a new instance with the note.
    await s.n.call(P.remove, { user_id, instance_id: a.instance_id });
    const d = await s.n.call(P.clone, { user_id, tier: 'pro', instance_id: a.instance_id, backup_id: b.backup_id });
    recordSecret(d.access_token);
    await s.running(user_id, d.instance_id, 300_000);
    expect(await readNote(d.instance_id)).toBe(note);

    // Restored into the running instance: the workspace goes back to the backup's, with a new token.
    await writeNote(d.instance_id, 'changed since');
    const r = await s.n.call(P.restore, { user_id, instance_id: d.instance_id, backup_id: b.backup_id, tier: 'pro' });
    recordSecret(r.access_token);
    expect(r.access_token).not.toBe(d.access_token);
    await s.running(user_id, d.instance_id, 300_000);
    expect(await readNote(d.instance_id)).toBe(note);
    expect(await tokenOf(d.instance_id)).toBe(r.access_token);

    // Another user can neither restore nor clone it.
    const bob = newUser();
    expect(await s.n.fail(P.clone, { user_id: bob, tier: 'pro', instance_id: a.instance_id, backup_id: b.backup_id })).toMatchObject({
      code: 'BACKUP_NOT_FOUND',
      status: 404,
    });
    expect(await s.n.fail(P.restore, { user_id: bob, instance_id: d.instance_id, backup_id: b.backup_id, tier: 'pro' })).toMatchObject({
      code: 'BACKUP_NOT_FOUND',
      status: 404,
    });

    // One bit changed in the archive: refused, and the running instance is untouched.
    const file = await readFile(archive(b.backup_id));
    file[file.length - 100]! ^= 0x80;
    await writeFile(archive(b.backup_id), file);
    expect(await s.n.fail(P.restore, { user_id, instance_id: d.instance_id, backup_id: b.backup_id, tier: 'pro' })).toMatchObject({
      code: 'BACKUP_CORRUPT',
      status: 422,
    });
    expect((await s.n.call(P.get, { user_id, instance_id: d.instance_id })).status).toBe('running');
    expect(await readNote(d.instance_id)).toBe(note);
    expect(await tokenOf(d.instance_id)).toBe(r.access_token);
    await s.n.call(P.remove, { user_id, instance_id: d.instance_id });
  }, 1_500_000);
});
