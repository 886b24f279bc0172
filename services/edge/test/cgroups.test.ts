import { setTimeout as sleep } from 'node:timers/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { containerUsage } from '../src/cgroups.ts';

// The swarm's live stats read a container's cgroups on its node: checked here against a real container of this
// machine's engine.

const docker = async (args: string[]): Promise<string> => (await promisify(execFile)('docker', args)).stdout;
let id: string | undefined;

afterAll(async () => {
  if (id) await docker(['rm', '-f', id]);
});

describe('a container usage read from its cgroups', () => {
  it('finds a running container, counts the CPU it burns and the memory it holds', async () => {
    const script = 'const a = Buffer.alloc(64 << 20, 1); setInterval(() => { const end = Date.now() + 50; while (Date.now() < end); }, 100); a[0]';
    id = (await docker(['run', '-d', '--label', 'agenthost.test=cgroups', '--entrypoint', 'node', 'agenthost/standin:1', '-e', script])).trim();
    await sleep(1500);
    const first = await containerUsage('/sys/fs/cgroup', id);
    await sleep(1000);
    const second = await containerUsage('/sys/fs/cgroup', id);
    expect(first && second).toBeTruthy();
    // It burns CPU half of each 100 ms: its CPU time grew between the readings (how much depends on the machine's load).
    expect(second!.cpu_ns).toBeGreaterThan(first!.cpu_ns);
    // Its 64 MiB buffer is in memory, and node's own share is far below 256 MiB (page cache left out).
    expect(second!.memory_bytes).toBeGreaterThan(64 << 20);
    expect(second!.memory_bytes).toBeLessThan(256 << 20);
    expect(await containerUsage('/sys/fs/cgroup', 'f'.repeat(64))).toBeUndefined();
  });
});
