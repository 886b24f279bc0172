import { execFile } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { promisify } from 'node:util';
import type { Logger } from '@agenthost/shared';
import type { DockerEngine } from '../docker/engine.ts';
import { o } from '../docker/call.ts';
import { LABEL_INSTANCE, LABEL_SCOPE } from '../docker/spec.ts';
import type { InstanceRepo } from './instance-repo.ts';

const exec = promisify(execFile);

/**
 * Measures the size of every plain instance volume (VOLUME_QUOTA=off, or made before quotas; the
 * size-limited ones are measured by the quota guard) in the background and stores it on the row, so the usage
 * call (storage_used_mb) is a single indexed sum. When the volumes are on this host, `du` on the
 * volume's mountpoint (one volume at a time, low priority); otherwise Docker's disk-usage API.
 */
export class StorageSampler {
  /** capped: volumes measured by the quota guard instead (size-limited ones), skipped here. */
  private readonly deps: {
    repo: InstanceRepo;
    engine: DockerEngine;
    scope: string;
    log: Logger;
    intervalSeconds: number;
    capped(id: string): Promise<boolean>;
  };
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(deps: StorageSampler['deps']) {
    this.deps = deps;
  }

  start(): void {
    const first = setTimeout(() => void this.sampleAll(), 5_000);
    first.unref();
    this.timer = setInterval(() => void this.sampleAll(), this.deps.intervalSeconds * 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async sampleAll(): Promise<void> {
    const { engine, repo, scope, log } = this.deps;
    if (this.running || !engine.available) return;
    this.running = true;
    try {
      const res = await engine.run('volume list', (abortSignal) =>
        engine.docker.listVolumes(o({ filters: { label: [`${LABEL_SCOPE}=${scope}`] }, abortSignal })),
      );
      const sizes = new Map<string, number>();
      let needDf = false;
      for (const v of res.Volumes ?? []) {
        const id = v.Labels?.[LABEL_INSTANCE];
        if (!id || (await this.deps.capped(id))) continue;
        const bytes = await duBytes(v.Mountpoint);
        if (bytes === undefined) needDf = true;
        else sizes.set(id, bytes);
      }
      if (needDf) {
        const df = (await engine.run(
          'system df',
          (abortSignal) => (engine.docker as unknown as { df(opts: object): Promise<unknown> }).df(o({ abortSignal })),
          60_000,
        )) as {
          Volumes?: { Labels?: Record<string, string>; UsageData?: { Size?: number } }[];
        };
        for (const v of df.Volumes ?? []) {
          const id = v.Labels?.[LABEL_INSTANCE];
          if (id && v.Labels?.[LABEL_SCOPE] === scope && !sizes.has(id) && !(await this.deps.capped(id)) && (v.UsageData?.Size ?? -1) >= 0)
            sizes.set(id, v.UsageData!.Size!);
        }
      }
      for (const [id, bytes] of sizes) {
        await repo.setStorageBytes(id, bytes);
      }
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'volume size sampling failed');
    } finally {
      this.running = false;
    }
  }
}

async function duBytes(mountpoint: string | undefined): Promise<number | undefined> {
  if (!mountpoint) return undefined;
  try {
    await access(mountpoint, constants.R_OK | constants.X_OK);
    const { stdout } = await exec('nice', ['-n', '19', 'du', '-s', '-B1', '--one-file-system', mountpoint], { timeout: 60_000 });
    const n = Number.parseInt(stdout.split(/\s/)[0] ?? '', 10);
    return Number.isFinite(n) ? n : undefined;
  } catch {
    return undefined;
  }
}
