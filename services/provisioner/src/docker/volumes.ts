import { execFile } from 'node:child_process';
import { access, chmod, chown, mkdir, readdir, readFile, rm, rmdir, stat, statfs } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@agenthost/shared';
import type { DockerEngine } from './engine.ts';
import { ignoreGone, o } from './call.ts';
import { labels, volumeName } from './spec.ts';

const exec = promisify(execFile);
/** A command of util-linux or e2fsprogs; its failure names what the tool said (stderr's last line), not only its exit. */
const run = (cmd: string, args: string[]) =>
  exec(cmd, args, { timeout: 60_000 }).catch((err: Error & { stderr?: string; code?: number }) => {
    const said = String(err.stderr ?? '')
      .trim()
      .split('\n')
      .pop();
    throw Object.assign(new Error(`${cmd} ${args.join(' ')} failed${said ? `: ${said}` : ''}`), { code: err.code });
  });

/** uid:gid of the agent user (deploy/images/runtime); the volume's data directory belongs to it. */
const AGENT_UID = 10001;

export interface VolumeUsage {
  usedBytes: number;
  sizeBytes: number;
  freeBytes: number;
}

/**
 * Instance state volumes with a hard size limit: one sparse file per instance under `<VOLUME_DIR>/<scope>`,
 * formatted ext4 and loop-mounted at `mnt/<id>`; the Docker volume is a `local` bind of `mnt/<id>/data`.
 * A write past the size gets ENOSPC inside the container, whatever the sampler sees.
 *
 * Why a bind of a mount we make, not Docker's `type=ext4,device=/dev/loopN`: loop numbers change across
 * reboots, while the file path does not, so `mountAll` at provisioner start re-attaches every volume from
 * its file. The data directory exists only inside the ext4 filesystem: when it is not mounted, Docker
 * cannot bind it and the container fails to start, so an agent never writes unbounded into VOLUME_DIR.
 * `mount -o loop` attaches with autoclear, so the unmount also frees the loop device.
 */
export class QuotaVolumes {
  /** enabled: VOLUME_QUOTA=enforce; when off, new instances get plain Docker volumes (made with the container). */
  private readonly deps: { engine: DockerEngine; log: Logger; scope: string; dir: string; enabled: boolean };

  constructor(deps: QuotaVolumes['deps']) {
    this.deps = deps;
  }

  /** Refuse to start when loop devices or the tools are missing (deploy/install.sh installs util-linux, mount, e2fsprogs). */
  async check(): Promise<void> {
    if (!this.deps.enabled) {
      this.deps.log.warn('VOLUME_QUOTA=off: instance volumes have no size limit while instances run (storage is checked at create only)');
      return;
    }
    try {
      await access('/dev/loop-control');
      await run('losetup', ['-f']);
      await run('mkfs.ext4', ['-V']);
    } catch (err) {
      throw new Error(
        `VOLUME_QUOTA=enforce needs loop devices (/dev/loop-control, losetup -f) and mkfs.ext4, running as root: ${(err as Error).message.split('\n')[0]}. ` +
          'Install util-linux, mount and e2fsprogs, or set VOLUME_QUOTA=off (no size limit on volumes while instances run).',
      );
    }
    await mkdir(join(this.deps.dir, 'mnt'), { recursive: true, mode: 0o700 });
  }

  file = (id: string): string => join(this.deps.dir, `${id}.ext4`);
  mountpoint = (id: string): string => join(this.deps.dir, 'mnt', id);
  dataDir = (id: string): string => join(this.mountpoint(id), 'data');

  /**
   * The size-limited volume of an instance: file, filesystem, mount and Docker volume, each made when missing.
   * An instance whose plain volume predates quotas keeps it (its size is sampled with du, checked at create only).
   */
  async ensure(i: { instanceId: string; userId: string }, sizeMb: number): Promise<void> {
    const { engine } = this.deps;
    const inspect = () =>
      ignoreGone(engine.run('volume inspect', (abortSignal) => engine.docker.getVolume(volumeName(i.instanceId)).inspect(o({ abortSignal }))));
    const file = this.file(i.instanceId);
    if (!(await exists(file))) {
      if (!this.deps.enabled || (await inspect())) return;
      const partial = `${file}.new`;
      await rm(partial, { force: true });
      await run('truncate', ['-s', `${sizeMb}M`, partial]);
      await chmod(partial, 0o600); // the agent's data: root only on the host
      // -m 0: no blocks reserved for root (the agent never is); the journal keeps it consistent after a crash.
      await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', 'lazy_itable_init=1,lazy_journal_init=1', partial]);
      await run('mv', ['-f', partial, file]); // a crash mid-mkfs leaves only the .new file, which is redone
    }
    await this.grow(i.instanceId, sizeMb);
    await this.mount(i.instanceId);
    const data = this.dataDir(i.instanceId);
    await mkdir(data, { recursive: true, mode: 0o755 });
    await chown(data, AGENT_UID, AGENT_UID);
    if (await inspect()) return;
    await engine.run('volume create', (abortSignal) =>
      engine.docker.createVolume(
        o({
          Name: volumeName(i.instanceId),
          Driver: 'local',
          DriverOpts: { type: 'none', o: 'bind', device: data },
          Labels: labels({ instanceId: i.instanceId, userId: i.userId, scope: this.deps.scope }),
          abortSignal,
        }),
      ),
    );
  }

  /** Mount the instance's filesystem unless it already is (after a reboot or a lost mount). */
  async mount(id: string): Promise<void> {
    const mnt = this.mountpoint(id);
    if (!(await exists(this.file(id))) || (await isMounted(mnt))) return;
    await mkdir(mnt, { recursive: true, mode: 0o755 });
    await run('mount', ['-t', 'ext4', '-o', 'loop,nodev,nosuid', this.file(id), mnt]);
  }

  /**
   * A larger allowance (a restart on a bigger tier) grows the volume. Mounted, it grows in place: the loop
   * device learns the file's new size and resize2fs grows ext4 online (root's CAP_SYS_RESOURCE); this does not
   * depend on the engine having let go of the old container's bind of it, which an unmount would. Where online
   * growth is refused (a containerised provisioner without that capability), it grows offline: unmount, fsck,
   * resize2fs on the file. A smaller allowance leaves it as it is; the quota guard holds the user's sum to the
   * tier's storage_mb. A failed growth is logged, the file gets its old length back, and the volume keeps its size.
   */
  private async grow(id: string, sizeMb: number): Promise<void> {
    const file = this.file(id);
    const before = (await stat(file)).size;
    if (before >= sizeMb * 1024 * 1024) return;
    const mnt = this.mountpoint(id);
    try {
      await run('truncate', ['-s', `${sizeMb}M`, file]);
      const [device] = (await isMounted(mnt)) ? await loopDevices(file) : [];
      const online = device ? await this.growOnline(id, device) : false;
      if (!online) await growOffline(file, mnt);
      this.deps.log.info({ instance_id: id, size_mb: sizeMb, online }, 'instance volume grown');
    } catch (err) {
      await run('truncate', ['-s', String(before), file]).catch(() => {}); // the filesystem never reached past it
      this.deps.log.warn({ instance_id: id, err: (err as Error).message.split('\n')[0] }, 'could not grow the instance volume; it keeps its size');
    }
  }

  private async growOnline(id: string, device: string): Promise<boolean> {
    try {
      await run('losetup', ['-c', device]);
      await run('resize2fs', [device]);
      return true;
    } catch (err) {
      this.deps.log.info({ instance_id: id, err: (err as Error).message.split('\n')[0] }, 'online volume growth refused; growing it offline');
      return false;
    }
  }

  /** Everything of the volume goes: Docker volume, mount, loop device, file. Idempotent. */
  async remove(id: string): Promise<void> {
    const { engine, log } = this.deps;
    await ignoreGone(engine.run('volume remove', (abortSignal) => engine.docker.getVolume(volumeName(id)).remove(o({ force: true, abortSignal }))));
    const mnt = this.mountpoint(id);
    if (await isMounted(mnt)) {
      try {
        await run('umount', [mnt]);
      } catch (err) {
        // Still held by something (a container being removed): detach now, the kernel frees it when released.
        log.warn({ instance_id: id, err: (err as Error).message.split('\n')[0] }, 'volume busy; lazy unmount');
        await run('umount', ['-l', mnt]);
      }
    }
    const file = this.file(id);
    for (const dev of await loopDevices(file)) await run('losetup', ['-d', dev]).catch(() => {});
    await rmdir(mnt).catch(() => {});
    await rm(file, { force: true });
    await rm(`${file}.new`, { force: true });
  }

  /** Instance ids that have a volume file here (for re-mounting at start and for orphans). */
  async ids(): Promise<string[]> {
    const names = await readdir(this.deps.dir).catch(() => [] as string[]);
    const fromFiles = names.filter((n) => n.endsWith('.ext4') || n.endsWith('.ext4.new')).map((n) => n.replace(/\.ext4(\.new)?$/, ''));
    const fromMounts = await readdir(join(this.deps.dir, 'mnt')).catch(() => [] as string[]);
    return [...new Set([...fromFiles, ...fromMounts])];
  }

  /** Has this instance a size-limited volume (as opposed to a plain volume made before quotas)? */
  has = (id: string): Promise<boolean> => exists(this.file(id));

  /**
   * Filesystem figures of a mounted volume (one statfs call), or undefined when it is not mounted. `mounts` is read
   * once per pass, so the volume may have gone since (a restore or a delete unmounts it before removing the
   * directory): statfs of the bare directory would measure the host's disk, and the user would be "over" the tier's
   * storage. So the figures count only when the mount point is the root of a filesystem of its own, the same one,
   * before and after the call.
   */
  async usage(id: string, mounts?: Set<string>): Promise<VolumeUsage | undefined> {
    const mnt = this.mountpoint(id);
    if (!(mounts ? mounts.has(mnt) : await isMounted(mnt))) return undefined;
    const before = await ownDevice(mnt);
    if (before === undefined) return undefined;
    const s = await statfs(mnt);
    if ((await ownDevice(mnt)) !== before) return undefined;
    return { usedBytes: (s.blocks - s.bfree) * s.bsize, sizeBytes: s.blocks * s.bsize, freeBytes: s.bavail * s.bsize };
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** The mount points of this mount namespace (/proc/self/mountinfo: field 5, octal-escaped); one read serves a whole pass. */
export async function mountPoints(): Promise<Set<string>> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  const unescapeOctal = (s: string) => s.replace(/\\([0-7]{3})/g, (_, n: string) => String.fromCharCode(Number.parseInt(n, 8)));
  return new Set(info.split('\n').map((l) => unescapeOctal(l.split(' ')[4] ?? '')));
}

/** Offline growth of an unmounted (or unmountable) volume file; mount() puts it back. */
async function growOffline(file: string, mnt: string): Promise<void> {
  if (await isMounted(mnt)) await unmountWhenFree(mnt);
  // The loop device lets go of the file after the unmount (asynchronously on newer kernels): until it has,
  // the filesystem may still be live, and fsck must not touch it.
  await until(async () => (await loopDevices(file)).length === 0, 10_000, `${file} is still attached to a loop device`);
  await run('e2fsck', ['-f', '-p', file]).catch((err: { code?: number }) => {
    if (err.code !== 1) throw err; // 1: errors corrected
  });
  await run('resize2fs', [file]);
}

/**
 * Unmount, waiting (up to 10 s) while the mount is busy: the engine lets go of its bind of the volume when it
 * has cleaned up the removed container, which can trail the removal itself on a loaded machine.
 */
const unmountWhenFree = (mnt: string): Promise<void> =>
  until(
    () =>
      run('umount', [mnt]).then(
        () => true,
        (err: Error) => {
          if (!/busy/i.test(err.message)) throw err;
          return false;
        },
      ),
    10_000,
    `${mnt} is still busy`,
  );

async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what} after ${timeoutMs} ms`);
    await sleep(200);
  }
}

const isMounted = async (path: string): Promise<boolean> => (await mountPoints()).has(path);

/** The device of the filesystem mounted at `path`, or undefined when `path` is a plain directory (or gone). */
async function ownDevice(path: string): Promise<number | undefined> {
  const [self, parent] = await Promise.all([stat(path), stat(dirname(path))]).catch(() => [undefined, undefined]);
  return self && parent && self.dev !== parent.dev ? self.dev : undefined;
}

/** Loop devices still attached to a file (normally none: autoclear frees them at unmount). */
async function loopDevices(file: string): Promise<string[]> {
  try {
    const { stdout } = await run('losetup', ['-j', file, '-O', 'NAME', '-n']);
    return stdout
      .split('\n')
      .map((s) => s.trim())
      .filter(Boolean);
  } catch {
    return [];
  }
}
