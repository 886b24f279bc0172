import { execFile, spawn } from 'node:child_process';
import { hkdfSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Logger } from '@agenthost/shared';
import type { InstanceCheckpoints } from '../domain/runtime.ts';
import type { DockerEngine } from './engine.ts';
import { containerName, HOLD_INIT } from './spec.ts';

const SCRIPT = fileURLToPath(new URL('../../../../deploy/criu/checkpoint.sh', import.meta.url));
const SECCOMP = fileURLToPath(new URL('../../../../deploy/criu/seccomp-no-io_uring.json', import.meta.url));

/** A dump or a restore of a 2 GB agent on a loaded 2-core host takes seconds; past this it has hung. */
const STEP_TIMEOUT_MS = 120_000;

export interface CheckpointSettings {
  /** The CRIU runtime (deploy/criu/build.sh): criu, its libraries and loader, hold-init, the sealer. */
  runtimeDir: string;
  /** Where this scope's sealed images are kept, one directory per instance (root only). */
  dir: string;
  /** The master key (CHECKPOINT_KEY): each instance's images are sealed under a key derived from it. */
  masterKey: Buffer;
}

/** What checkpoint.sh says a step took (image_mb, dump_ms, seal_ms; open_ms, restore_ms), for the log. */
export type StepFigures = Record<string, number>;

const figures = (out: string): StepFigures =>
  Object.fromEntries([...(out.trim().split('\n').pop() ?? '').matchAll(/(\w+)=(\d+)/g)].map((m) => [m[1] as string, Number(m[2])]));

/** What a checkpointable container is made with (docker/spec.ts). */
export interface CheckpointContainer {
  runtimeDir: string;
  /** Docker's default seccomp profile with io_uring refused: CRIU cannot dump libuv's io_uring instance. */
  seccomp: string;
}

/**
 * The checkpointed sleep's host side (docs/decisions/0049-...): an agent's processes dumped to an image sealed to its
 * instance, container and checkpoint id (deploy/criu/checkpoint.sh), and restored into the same running container.
 * The key reaches the script on stdin only; the plaintext image lives only in a root-only tmpfs.
 */
export class Checkpoints {
  readonly container: CheckpointContainer;
  private readonly settings: CheckpointSettings;

  private constructor(settings: CheckpointSettings) {
    this.settings = settings;
    this.container = { runtimeDir: settings.runtimeDir, seccomp: JSON.stringify(JSON.parse(readFileSync(SECCOMP, 'utf8'))) };
  }

  /**
   * Checkpointing, when this host can: `mode` not off, a key, a local engine (CRIU runs in the container's
   * namespaces from here), the runtime built, and `criu check` passing. Otherwise undefined, and the log says why.
   */
  static async detect(
    opts: Omit<CheckpointSettings, 'masterKey'> & { mode: 'auto' | 'off'; masterKey: Buffer | undefined; dockerHost: string | undefined },
    log: Logger,
  ): Promise<Checkpoints | undefined> {
    const off = (why: string) => (log.info({ checkpoint: false }, `checkpointed sleep off: ${why}; deep sleep stops the agent`), undefined);
    if (opts.mode === 'off') return off('SLEEP_CHECKPOINT=off');
    if (!opts.masterKey) return off('no CHECKPOINT_KEY');
    if (opts.dockerHost && !opts.dockerHost.startsWith('unix://')) return off(`the Docker engine is not on this host (${opts.dockerHost})`);
    if (process.getuid?.() !== 0) return off('the provisioner does not run as root (CRIU needs it)');
    if (!existsSync(join(opts.runtimeDir, 'criu'))) return off(`no CRIU runtime in ${opts.runtimeDir} (deploy/criu/build.sh)`);
    try {
      await promisify(execFile)('bash', [SCRIPT, 'check'], { env: { ...process.env, CRIU_RT: opts.runtimeDir }, timeout: 30_000 });
    } catch (err) {
      return off(((err as { stderr?: string }).stderr ?? String(err)).trim().slice(0, 300));
    }
    log.info({ checkpoint: true, runtime: opts.runtimeDir, dir: opts.dir }, 'checkpointed sleep on: deep sleep checkpoints the agent');
    return new Checkpoints({ runtimeDir: opts.runtimeDir, dir: opts.dir, masterKey: opts.masterKey });
  }

  /** Dump the agent under `initPid` (the container's hold-init) and seal its image; resolves to what it took. */
  async dump(instanceId: string, initPid: number, binding: string): Promise<StepFigures> {
    return figures(await this.run('dump', instanceId, initPid, binding));
  }

  /** Open the image sealed to `binding` and restore the agent under `initPid`; the image is deleted once restored. */
  async restore(instanceId: string, initPid: number, binding: string): Promise<StepFigures> {
    return figures(await this.run('restore', instanceId, initPid, binding));
  }

  /** Delete an instance's image, if any (its wake booted it, it was stopped, restarted, restored or deleted). */
  async drop(instanceId: string): Promise<void> {
    // With a seal cut short (checkpoint.sh seals into <dir>.new and moves it into place whole).
    await rm(`${this.imageDir(instanceId)}.new`, { recursive: true, force: true });
    await rm(this.imageDir(instanceId), { recursive: true, force: true });
  }

  /** The instances with an image kept (the reconciler removes those without a row). */
  async ids(): Promise<string[]> {
    return (await readdir(this.settings.dir).catch(() => [] as string[])).filter((name) => !name.endsWith('.new'));
  }

  private imageDir(instanceId: string): string {
    return join(this.settings.dir, instanceId);
  }

  /** The instance's own key: HKDF of the master key, so one instance's key opens nothing of another's. */
  private key(instanceId: string): Buffer {
    return Buffer.from(hkdfSync('sha256', this.settings.masterKey, Buffer.alloc(0), `agenthost checkpoint v1 ${instanceId}`, 32));
  }

  private run(verb: 'dump' | 'restore', instanceId: string, initPid: number, binding: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const child = spawn('bash', [SCRIPT, verb, String(initPid), binding, this.imageDir(instanceId)], {
        env: { ...process.env, CRIU_RT: this.settings.runtimeDir },
        stdio: ['pipe', 'pipe', 'pipe'],
        timeout: STEP_TIMEOUT_MS,
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.stdin.on('error', () => {}); // the script may fail before it reads the key
      child.stdin.end(this.key(instanceId));
      child.on('error', reject);
      child.on('close', (code, signal) => {
        if (code === 0) resolve(out);
        else reject(new Error(`checkpoint ${verb}: ${(err.trim().split('\n').slice(-4).join('; ') || `ended by ${signal ?? code}`).slice(0, 400)}`));
      });
    });
  }
}

/**
 * The checkpointed sleep of instance containers on one engine. The image is bound to the instance, the container's
 * id (a recreated container is another) and the checkpoint's id (the row's: an older image does not open).
 */
export function containerCheckpoints(engine: DockerEngine, checkpoints: Checkpoints, burstCpus: (cpus: number) => number): InstanceCheckpoints {
  const setCpus = (id: string, cpus: number) => engine.updateLimits(id, { NanoCpus: Math.round(cpus * 1e9) });
  const target = async (id: string) => {
    const info = await engine.run('container inspect', (abortSignal) => engine.docker.getContainer(containerName(id)).inspect({ abortSignal }));
    const entry = info.Config.Entrypoint;
    return {
      // Containers made before checkpointing was on have docker-init: they sleep stopped until they are recreated.
      holdInit: (Array.isArray(entry) ? entry[0] : entry) === HOLD_INIT,
      running: info.State.Running && !info.State.Paused,
      pid: info.State.Pid,
      binding: (checkpointId: string) => `${id}:${info.Id}:${checkpointId}`,
      memory: { Memory: info.HostConfig.Memory ?? 0, MemorySwap: info.HostConfig.MemorySwap ?? 0 },
    };
  };
  return {
    can: async (id) => (await target(id)).holdInit,
    async checkpoint(id, checkpointId) {
      const t = await target(id);
      if (!t.holdInit || !t.running) throw new Error(`checkpoint: the container is ${t.holdInit ? 'not running' : 'not checkpointable'}`);
      // CRIU writes the image into the tmpfs from inside the container's cgroups, so its pages count against the
      // container's memory limit beside the agent's: an agent using more than half its limit was killed by the OOM
      // killer mid-dump. Room for both while it dumps (an image is at most what the agent holds), the limit back after.
      const { Memory, MemorySwap } = t.memory;
      if (Memory > 0) await engine.updateLimits(id, { Memory: Memory * 2, MemorySwap: MemorySwap > 0 ? MemorySwap + Memory : MemorySwap });
      try {
        return await checkpoints.dump(id, t.pid, t.binding(checkpointId));
      } finally {
        if (Memory > 0) await engine.updateLimits(id, t.memory);
      }
    },
    async restore(id, checkpointId, cpus) {
      const t = await target(id);
      if (!t.holdInit || !t.running) throw new Error(`restore: the container is ${t.holdInit ? 'not running' : 'not checkpointable'}`);
      // CRIU restores inside the container's cgroups, so under its CPU limit: on a burst, as a boot (BOOT_CPUS).
      const burst = burstCpus(cpus);
      if (burst > cpus) await setCpus(id, burst);
      try {
        return await checkpoints.restore(id, t.pid, t.binding(checkpointId));
      } finally {
        if (burst > cpus) await setCpus(id, cpus);
      }
    },
    drop: (id) => checkpoints.drop(id),
  };
}
