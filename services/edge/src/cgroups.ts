import { readFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * A container's CPU time and memory from its node's cgroups (the host's /sys/fs/cgroup mounted read-only), under
 * the layouts Docker uses: cgroup v1 (cgroupfs: <controller>/docker/<id>) and v2 (systemd:
 * system.slice/docker-<id>.scope, or cgroupfs: docker/<id>). Undefined when the container has no cgroup here.
 */
export async function containerUsage(root: string, id: string): Promise<{ cpu_ns: number; memory_bytes: number } | undefined> {
  return (await v2(root, id)) ?? (await v1(root, id));
}

const read = (file: string) => readFile(file, 'utf8').catch(() => undefined);
const field = (text: string, name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);

async function v2(root: string, id: string) {
  for (const dir of [path.join(root, 'system.slice', `docker-${id}.scope`), path.join(root, 'docker', id)]) {
    const [current, stat, cpu] = await Promise.all([
      read(path.join(dir, 'memory.current')),
      read(path.join(dir, 'memory.stat')),
      read(path.join(dir, 'cpu.stat')),
    ]);
    if (current === undefined || cpu === undefined) continue;
    return { cpu_ns: field(cpu, 'usage_usec') * 1000, memory_bytes: Math.max(0, Number(current) - field(stat ?? '', 'inactive_file')) };
  }
  return undefined;
}

async function v1(root: string, id: string) {
  const [usage, stat, cpu] = await Promise.all([
    read(path.join(root, 'memory', 'docker', id, 'memory.usage_in_bytes')),
    read(path.join(root, 'memory', 'docker', id, 'memory.stat')),
    read(path.join(root, 'cpuacct', 'docker', id, 'cpuacct.usage')),
  ]);
  if (usage === undefined || cpu === undefined) return undefined;
  return { cpu_ns: Number(cpu), memory_bytes: Math.max(0, Number(usage) - field(stat ?? '', 'total_inactive_file')) };
}
