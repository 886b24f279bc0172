import { afterAll, beforeAll } from 'vitest';
import type { z } from 'zod';
import { contracts } from '@agenthost/shared';
import {
  backupStore as baseBackupStore,
  type BackupStore as BaseBackupStore,
  recordSecret,
  startStack,
  type Stack,
  cleanupDocker,
  docker,
  gatewayEnv,
  natsClient,
  testNetwork,
  type Nats,
} from '@agenthost/testkit';
import { archiveKey, openArchive, type ArchiveIds } from '../src/backups/archive.ts';
import { waitRunning } from './helpers.ts';

const P = contracts.provisioner;

/** The test kit's backup store (settings and archive paths of one suite), and what a test reads of its archives. */
export interface BackupStore extends BaseBackupStore {
  /** The decrypted tar of an archive, opened as the provisioner opens it. */
  plaintext(ids: ArchiveIds): Promise<Buffer>;
}

export async function backupStore(network: string): Promise<BackupStore> {
  const store = await baseBackupStore(network);
  return {
    ...store,
    async plaintext(ids) {
      const chunks: Buffer[] = [];
      for await (const c of await openArchive(store.archive(ids.backup_id), archiveKey(Buffer.from(store.env.BACKUP_KEY, 'base64'), ids)))
        chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    },
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
