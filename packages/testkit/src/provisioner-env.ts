import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from 'nats';
import { type Contract, contracts, createLogger, endpoint, type In, type Out, request, serve } from '@agenthost/shared';
import { STANDIN } from './docker.ts';
import type { NatsServer } from './nats.ts';
import { recordSecret, testAsserter } from './secrets.ts';

/*
 * Settings and clients of suites that run the provisioner (and instances) in a stack: its settings for a test, the
 * gateway's, a bus client that calls the backends as the gateway does, and stand-ins for backends a suite leaves out.
 */

export interface ProvisionerEnvOptions {
  network: string;
  ports: [number, number];
  /** Tier table overrides (small resource limits for tests). */
  tiers?: Record<string, Record<string, number>>;
  extra?: Record<string, string>;
}

/** Provisioner settings of a test: the stand-in image as "openclaw", a private network and port range. */
export function provisionerEnv(o: ProvisionerEnvOptions): Record<string, string> {
  return {
    FRAMEWORK_IMAGES: JSON.stringify({ openclaw: STANDIN }),
    DEFAULT_VERSION: 'latest',
    INSTANCE_NETWORK: o.network,
    PORT_RANGE_START: String(o.ports[0]),
    PORT_RANGE_END: String(o.ports[1]),
    READY_TIMEOUT_SECONDS: '60',
    RECONCILE_INTERVAL_SECONDS: '5',
    STATS_INTERVAL_SECONDS: '2',
    STORAGE_SAMPLE_INTERVAL_SECONDS: '5',
    TIER_LIMITS_JSON: JSON.stringify(
      o.tiers ?? {
        free: { memory_mb: 256, cpus: 0.5, pids: 64 },
        pro: { memory_mb: 256, cpus: 0.5, pids: 64 },
        enterprise: { memory_mb: 256, cpus: 0.5, pids: 64 },
      },
    ),
    ...o.extra,
  };
}

/** The gateway must listen where instances can reach it (the bridge address), not only on 127.0.0.1. */
export const gatewayEnv = { GATEWAY_HOST: '0.0.0.0' };

export const newUser = (): string => crypto.randomUUID();

export interface Nats {
  nc: NatsConnection;
  call<C extends Contract>(c: C, input: In<C>, timeoutMs?: number): Promise<Out<C>>;
  /** The AppError code of a call that must fail. */
  fail<C extends Contract>(c: C, input: In<C>, timeoutMs?: number): Promise<{ code: string; status: number; message: string }>;
  close(): Promise<void>;
}

/** A client that calls the backends as the gateway does: each call for a user carries the gateway's assertion. */
export async function natsClient(nats: NatsServer): Promise<Nats> {
  const nc = await nats.connect();
  const asserter = testAsserter();
  const call: Nats['call'] = (c, input, timeoutMs = 30_000) => request(nc, c, input, { timeoutMs, asserter });
  return {
    nc,
    call,
    async fail(c, input, timeoutMs) {
      try {
        await call(c, input, timeoutMs);
      } catch (err) {
        const e = err as { code: string; status: number; message: string };
        return { code: e.code, status: e.status, message: e.message };
      }
      throw new Error(`${c.subject} succeeded but was expected to fail`);
    },
    close: () => nc.drain(),
  };
}

/**
 * Answers billing.v1.subscription.status with an active pro subscription for every wallet, so the
 * gateway lets signed-in users through its subscriber routes without a chain (suites about keys and instances;
 * the end-to-end tests use a real subscription).
 */
export async function activeSubscriptions(nats: NatsServer): Promise<{ stop(): Promise<void> }> {
  const nc = await nats.connect();
  const log = createLogger('fake-billing', 'silent');
  const srv = await serve(nc, { name: 'billing-chain', version: '0.0.0', log }, [
    endpoint(contracts.billing.status, async (i) => ({
      wallet_address: i.wallet_address,
      tier: 'pro' as const,
      is_active: true,
      expires_at: new Date(Date.now() + 30 * 86400_000).toISOString(),
      cancelled: false,
      refreshed_at: new Date().toISOString(),
    })),
  ]);
  return {
    async stop() {
      await srv.stop();
      await nc.drain();
    },
  };
}

/** A backup master key and directory of one suite: the provisioner's settings, and where its archives are. */
export interface BackupStore {
  env: { BACKUP_KEY: string; BACKUP_DIR: string };
  /** The archive file of a backup of this suite's scope (network). */
  archive(backupId: string): string;
  remove(): Promise<void>;
}

export async function backupStore(network: string): Promise<BackupStore> {
  const key = randomBytes(32).toString('base64');
  recordSecret(key); // the log scan proves it never reaches a log line
  const dir = await mkdtemp(join(tmpdir(), 'ah-backups-'));
  return {
    env: { BACKUP_KEY: key, BACKUP_DIR: dir },
    archive: (backupId: string) => join(dir, network, `${backupId}.bak`),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
