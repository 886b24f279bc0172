import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll } from 'vitest';
import { startStack, testAsserter, waitFor, type NatsServer, type Stack } from '@agenthost/testkit';
import { request, serve, createLogger, endpoint, contracts, type Contract } from '@agenthost/shared';
import type { z } from 'zod';
import { firewallTag, removeFirewall } from '../src/docker/firewall.ts';

const exec = promisify(execFile);

export const STANDIN = 'agenthost/standin';

/** docker CLI; resolves with stdout, rejects with the CLI error. */
export async function docker(...args: string[]): Promise<string> {
  const { stdout } = await exec('docker', args, { timeout: 120_000, maxBuffer: 16 * 1024 * 1024 });
  return stdout.trim();
}

/** `docker <args>` that may fail: { code, stdout, stderr }. */
export async function dockerTry(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec('docker', args, { timeout: 120_000, maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, stdout: stdout.trim(), stderr: stderr.trim() };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: (e.stdout ?? '').trim(), stderr: (e.stderr ?? '').trim() };
  }
}

export const exists = async (kind: 'container' | 'volume' | 'network', name: string): Promise<boolean> =>
  (await dockerTry(kind, 'inspect', name)).code === 0;

/** A unique network (= label scope) per test file, so parallel files never touch each other's instances. */
export const testNetwork = (file: string): string => `ah-t-${file}-${randomBytes(3).toString('hex')}`;

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

/** Remove everything a test file created in Docker and the host firewall (also after a failure). */
export async function cleanupDocker(network: string): Promise<void> {
  const scope = `agenthost.scope=${network}`;
  const ids = (await dockerTry('ps', '-aq', '--filter', `label=${scope}`)).stdout.split('\n').filter(Boolean);
  if (ids.length) await dockerTry('rm', '-f', '-v', ...ids);
  const vols = (await dockerTry('volume', 'ls', '-q', '--filter', `label=${scope}`)).stdout.split('\n').filter(Boolean);
  if (vols.length) await dockerTry('volume', 'rm', '-f', ...vols);
  await dockerTry('network', 'rm', network);
  await removeFirewall(firewallTag(network));
  await cleanupVolumeFiles(network);
}

/** The provisioner's size-limited volume files of a test scope (VOLUME_DIR default), with their mounts. */
export const volumeDir = (network: string): string => join(process.env.AGENTHOST_STATE || '/var/lib/agenthost', 'volumes', network);

async function cleanupVolumeFiles(network: string): Promise<void> {
  const dir = volumeDir(network);
  for (const id of await readdir(join(dir, 'mnt')).catch(() => [] as string[])) await exec('umount', ['-l', join(dir, 'mnt', id)]).catch(() => {});
  await rm(dir, { recursive: true, force: true });
}

/** Build (once) a stand-in variant whose behaviour is fixed by environment baked into the image. */
export async function standinVariant(tag: string, env: Record<string, string>): Promise<string> {
  const image = `${STANDIN}:${tag}`;
  const dockerfile = `FROM ${STANDIN}:latest\n${Object.entries(env).map(([k, v]) => `ENV ${k}=${v}`).join('\n')}\nLABEL agenthost.test=variant\n`;
  await new Promise<void>((resolve, reject) => {
    const child = execFile('docker', ['build', '-q', '-t', image, '-'], { timeout: 120_000, env: { ...process.env, DOCKER_BUILDKIT: '0' } }, (err) =>
      err ? reject(err) : resolve(),
    );
    child.stdin!.end(dockerfile);
  });
  return image;
}

export interface Nats {
  nc: NatsConnection;
  call<C extends Contract>(c: C, input: z.input<C['input']>, timeoutMs?: number): Promise<z.output<C['output']>>;
  /** The AppError code of a call that must fail. */
  fail<C extends Contract>(c: C, input: z.input<C['input']>, timeoutMs?: number): Promise<{ code: string; status: number; message: string }>;
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
 * A stand-in for keyvault's credentials.issue only (used where a test needs to make keyvault fail or
 * count calls); other tests run the real keyvault service.
 */
export async function fakeKeyvault(nc: NatsConnection): Promise<{ calls: number; stop(): Promise<void> }> {
  const state = { calls: 0 };
  const service = await serve(nc, { name: 'keyvault', version: '0.0.0', log: createLogger('fake-keyvault', 'silent') }, [
    endpoint(contracts.keyvault.issueCredentials, async () => {
      state.calls++;
      return { instance_secret: randomBytes(24).toString('base64url'), instance_key: randomBytes(32).toString('base64'), key_id: 'test' };
    }),
    endpoint(contracts.keyvault.purgeInstance, async () => ({ keys_deleted: 0 })),
  ]);
  return {
    get calls() {
      return state.calls;
    },
    stop: async () => {
      await service.stop();
    },
  };
}

export { waitFor };

export const newUser = (): string => crypto.randomUUID();

/** Waits until the instance runs; a failed one is reported at once, with the last lines of its agent's log. */
export const waitRunning = (n: Nats, user_id: string, instance_id: string, timeoutMs = 30_000) =>
  waitFor(
    `${instance_id} running`,
    async () => {
      const v = await n.call(contracts.provisioner.get, { user_id, instance_id });
      if (v.status === 'failed') {
        const { lines } = await n.call(contracts.provisioner.logs, { user_id, instance_id, tail: 40 });
        throw new Error(`failed: ${v.failure_reason}\n${lines.join('\n')}`);
      }
      return v.status === 'running' ? v : undefined;
    },
    timeoutMs,
    250,
  );

export interface InstanceSuite {
  network: string;
  stack: Stack;
  n: Nats;
}

/**
 * keyvault and the provisioner of one test file (its own network and host ports), started before its tests and
 * removed after them, Docker leftovers included. `extra` is added to the provisioner's settings.
 */
export function instanceSuite(file: string, ports: [number, number], extra: Record<string, string> = {}): InstanceSuite {
  const s = { network: testNetwork(file) } as InstanceSuite;
  beforeAll(async () => {
    await cleanupDocker(s.network);
    s.stack = await startStack({
      services: ['keyvault', 'provisioner'],
      serviceEnv: { provisioner: provisionerEnv({ network: s.network, ports, extra }), gateway: gatewayEnv },
    });
    s.n = await natsClient(s.stack.nats);
  }, 180_000);
  afterAll(async () => {
    await s.n?.close();
    await s.stack?.stop();
    await cleanupDocker(s.network);
  });
  return s;
}
