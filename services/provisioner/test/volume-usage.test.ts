import { execFile } from 'node:child_process';
import { mkdtemp, rm, statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@agenthost/shared';
import type { DockerEngine } from '../src/docker/engine.ts';
import { mountPoints, QuotaVolumes } from '../src/docker/volumes.ts';

// The storage quota guard reads the mount table once per pass, then measures each volume. A volume unmounted in
// between (a restore replaces it, a delete removes it) once measured as the host's disk: the user was then "over"
// the tier's storage, and a clone right after a restore answered 403 STORAGE_LIMIT_EXCEEDED. Real loop mounts.
const exec = promisify(execFile);
const MiB = 1024 * 1024;
const id = 'inst-0123456789abcdef0123';

let dir: string;
let volumes: QuotaVolumes;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ah-volume-usage-'));
  // The engine is not reached by mount() and usage(), the two calls under test.
  volumes = new QuotaVolumes({ engine: {} as DockerEngine, log: createLogger('volume-usage', 'silent'), scope: 'test', dir, enabled: true });
  await volumes.check();
  await exec('truncate', ['-s', '16M', volumes.file(id)]);
  await exec('mkfs.ext4', ['-q', '-F', '-m', '0', volumes.file(id)]);
  await volumes.mount(id);
});

afterAll(async () => {
  await exec('umount', [volumes.mountpoint(id)]).catch(() => {});
  await rm(dir, { recursive: true, force: true });
});

describe("a volume's usage", () => {
  it("measures the volume's own filesystem, and gives no figure for one unmounted since the mount table was read", async () => {
    const mounted = await volumes.usage(id);
    expect(mounted?.sizeBytes).toBeGreaterThan(8 * MiB);
    expect(mounted?.sizeBytes).toBeLessThanOrEqual(16 * MiB);

    const stale = await mountPoints();
    expect(stale.has(volumes.mountpoint(id))).toBe(true);
    await exec('umount', [volumes.mountpoint(id)]);
    // The bare directory is on the host's disk, which is far larger than the volume: that is what was measured.
    expect((await statfs(volumes.mountpoint(id))).blocks * (await statfs(volumes.mountpoint(id))).bsize).toBeGreaterThan(16 * MiB);
    expect(await volumes.usage(id, stale)).toBeUndefined();
    expect(await volumes.usage(id)).toBeUndefined();

    await volumes.mount(id);
    expect((await volumes.usage(id, stale))?.sizeBytes).toBe(mounted?.sizeBytes);
  });
});
