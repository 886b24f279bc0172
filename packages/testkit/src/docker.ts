import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { firewallTag, removeFirewall } from '@agenthost/shared';

/*
 * Docker for suites that run instances: the docker CLI, the stand-in agent image and its variants, and each test
 * file's own network (= label scope), removed with everything in it after the file.
 */

export { containerName } from '@agenthost/shared';

const exec = promisify(execFile);

/** The stand-in agent image (deploy/images/standin), run as "openclaw" by the suites that need no real OpenClaw. */
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

export const exists = async (kind: 'container' | 'volume' | 'network', name: string): Promise<boolean> => (await dockerTry(kind, 'inspect', name)).code === 0;

/** A unique network (= label scope) per test file, so parallel files never touch each other's instances. */
export const testNetwork = (file: string): string => `ah-t-${file}-${randomBytes(3).toString('hex')}`;

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

/** Build (once) a stand-in variant whose behaviour is fixed by environment (and any further Dockerfile lines) baked into the image. */
export async function standinVariant(tag: string, env: Record<string, string>, lines: string[] = []): Promise<string> {
  const image = `${STANDIN}:${tag}`;
  const dockerfile = `FROM ${STANDIN}:latest\n${Object.entries(env)
    .map(([k, v]) => `ENV ${k}=${v}`)
    .join('\n')}\n${lines.map((l) => `${l}\n`).join('')}LABEL agenthost.test=variant\n`;
  await new Promise<void>((resolve, reject) => {
    const child = execFile('docker', ['build', '-q', '-t', image, '-'], { timeout: 120_000, env: { ...process.env, DOCKER_BUILDKIT: '0' } }, (err) =>
      err ? reject(err) : resolve(),
    );
    child.stdin!.end(dockerfile);
  });
  return image;
}

/**
 * Stand-in variants of the upgrade tests (tags t-up-…, theirs alone): `mark` is baked into the image as
 * STANDIN_MARK, so the agent's /env tells which image it runs; `crash` exits at once, `never` is never ready.
 */
export async function buildUpgradeImages(prefix: string): Promise<{ one: string; two: string; crash: string; never: string }> {
  const one = `${prefix}-1`;
  const two = `${prefix}-2`;
  const crash = `${prefix}-crash`;
  const never = `${prefix}-never`;
  await standinVariant(one, { STANDIN_MARK: `${prefix}-1` });
  await standinVariant(two, { STANDIN_MARK: `${prefix}-2` });
  await standinVariant(crash, { STANDIN_EXIT_AFTER_MS: '0', STANDIN_EXIT_CODE: '3' });
  await standinVariant(never, { STANDIN_NEVER_READY: '1' });
  return { one, two, crash, never };
}

/** Remove the test's tags (and the images left without a tag by a rebuild), once no container uses them. */
export async function removeUpgradeImages(prefix: string, extra: string[] = []): Promise<void> {
  const tags = (await dockerTry('image', 'ls', '--format', '{{.Tag}}', STANDIN)).stdout.split('\n').filter((t) => t.startsWith(`${prefix}-`));
  for (const ref of [...tags.map((t) => `${STANDIN}:${t}`), ...extra]) await dockerTry('rmi', ref);
}
