import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { z } from 'zod';
import { contracts } from '@agenthost/shared';
import { recordSecret, startStack, type Stack } from '@agenthost/testkit';
import { archiveKey, openArchive, type ArchiveIds } from '../src/backups/archive.ts';
import { cleanupDocker, docker, gatewayEnv, natsClient, testNetwork, waitRunning, type Nats } from './helpers.ts';

const P = contracts.provisioner;

/** A backup master key and directory of one suite: the provisioner's settings, and what a test reads of its archives. */
export interface BackupStore {
  env: { BACKUP_KEY: string; BACKUP_DIR: string };
  /** The archive file of a backup of this suite's scope (network). */
  archive(backupId: string): string;
  /** The decrypted tar of an archive, opened as the provisioner opens it. */
  plaintext(ids: ArchiveIds): Promise<Buffer>;
  remove(): Promise<void>;
}

export async function backupStore(network: string): Promise<BackupStore> {
  const key = randomBytes(32).toString('base64');
  recordSecret(key); // the log scan proves it never reaches a log line
  const dir = await mkdtemp(join(tmpdir(), 'ah-backups-'));
  const archive = (backupId: string) => join(dir, network, `${backupId}.bak`);
  return {
    env: { BACKUP_KEY: key, BACKUP_DIR: dir },
    archive,
    async plaintext(ids) {
      const chunks: Buffer[] = [];
      for await (const c of await openArchive(archive(ids.backup_id), archiveKey(Buffer.from(key, 'base64'), ids))) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/** The OpenClaw gateway token the instance's container was given. */
export const tokenOf = async (id: string): Promise<string | undefined> =>
  (JSON.parse(await docker('inspect', `agenthost-${id}`))[0].Config.Env as string[])
    .find((e) => e.startsWith('OPENCLAW_GATEWAY_TOKEN='))
    ?.slice('OPENCLAW_GATEWAY_TOKEN='.length);

export interface BackupSuite {
  network: string;
  stack: Stack;
  n: Nats;
  store: BackupStore;
  /** Wait until the instance runs (a failed one is reported as it is). */
  running(user_id: string, instance_id: string, timeoutMs?: number): Promise<contracts.provisioner.InstanceView>;
  /** Create an instance (its access token kept out of logs) and wait until it runs. */
  newInstance(user_id: string, tier?: 'free' | 'pro'): Promise<z.output<typeof contracts.provisioner.create.output>>;
}

/** The stand-in's state kept in its volume: `born` is made at its first start, `boots` counts its starts. */
export const agentState = async (port: number): Promise<{ born: string; boots: number }> =>
  ((await (await fetch(`http://127.0.0.1:${port}/`)).json()) as { state: { born: string; boots: number } }).state;

/**
 * keyvault and the provisioner of one backup suite (its own network, ports and backup store), started before
 * its tests and removed after them; `setup` runs once the stack is up (another replica, say).
 */
export function backupSuite(file: string, env: (network: string) => Record<string, string>, setup?: (s: BackupSuite) => Promise<void>): BackupSuite {
  const s = { network: testNetwork(file) } as BackupSuite;
  s.running = (user_id, instance_id, timeoutMs = 60_000) => waitRunning(s.n, user_id, instance_id, timeoutMs);
  s.newInstance = async (user_id, tier = 'pro') => {
    const c = await s.n.call(P.create, { user_id, tier, framework: 'openclaw' });
    recordSecret(c.access_token!);
    await s.running(user_id, c.instance_id);
    return c;
  };
  beforeAll(async () => {
    await cleanupDocker(s.network);
    s.store = await backupStore(s.network);
    s.stack = await startStack({
      services: ['keyvault', 'provisioner'],
      serviceEnv: { provisioner: { ...env(s.network), ...s.store.env }, gateway: gatewayEnv },
    });
    await setup?.(s);
    s.n = await natsClient(s.stack.nats);
  });
  afterAll(async () => {
    await s.n?.close();
    await s.stack?.stop();
    await cleanupDocker(s.network);
    await s.store?.remove();
  });
  return s;
}
