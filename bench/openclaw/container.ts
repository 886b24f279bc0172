// The docker CLI and what the openclaw bench reads of a running container: when it answers /readyz, where its
// start time went, and what its memory is made of. run.ts holds the runs themselves.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';

const exec = promisify(execFile);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const docker = async (...args: string[]) => (await exec('docker', args, { maxBuffer: 16 << 20 })).stdout.trim();
export const dockerQuiet = (...args: string[]) => docker(...args).catch(() => '');

/** Polls /readyz every 50 ms: the same cadence for both sides. */
export async function readyz(port: number, deadline: number): Promise<boolean> {
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      if (r.status === 200) return true;
    } catch {
      /* not yet */
    }
    await sleep(50);
  }
  return false;
}

/** The gateway's own log lines as ms after the container started: where the start time goes. */
export async function startProfile(container: string): Promise<Record<string, number>> {
  const started = Date.parse(await docker('inspect', '-f', '{{.State.StartedAt}}', container));
  const out = await exec('docker', ['logs', '--timestamps', container], { maxBuffer: 16 << 20 }).catch(() => ({ stdout: '', stderr: '' }));
  const profile: Record<string, number> = {};
  for (const line of `${out.stdout}\n${out.stderr}`.split('\n')) {
    const m = /^(\S+Z) (.*)$/.exec(line);
    if (!m) continue;
    const msg = m[2]!.replace(/^\S+T\S+ /, '').slice(0, 80);
    if (/\[gateway\]|listening|ready|seeded|plugin/i.test(msg) && !(msg in profile)) profile[msg] = Date.parse(m[1]!) - started;
  }
  return profile;
}

/** RSS of the container's processes and its parts (MB): anonymous = V8 heap + native buffers, file = code and mapped files. */
export async function memoryOf(container: string) {
  const pids = (await docker('top', container, '-eo', 'pid'))
    .split('\n')
    .slice(1)
    .map((s) => Number(s.trim()))
    .filter(Boolean);
  const sum = { rss_mb: 0, anonymous_mb: 0, file_mb: 0, shmem_mb: 0 };
  for (const pid of pids) {
    try {
      const t = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
      const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(t)?.[1] ?? 0) / 1024;
      sum.rss_mb += kb('Rss');
      sum.anonymous_mb += kb('Anonymous');
      sum.file_mb += kb('Rss') - kb('Anonymous') - kb('Shmem');
      sum.shmem_mb += kb('Shmem');
    } catch {
      /* exited meanwhile */
    }
  }
  const cg = await dockerQuiet('stats', '--no-stream', '--format', '{{.MemUsage}}', container);
  const mb = (v: number) => Math.round(v);
  return {
    processes: pids.length,
    rss_mb: mb(sum.rss_mb),
    anonymous_mb: mb(sum.anonymous_mb),
    file_mb: mb(sum.file_mb),
    shmem_mb: mb(sum.shmem_mb),
    cgroup_usage: cg,
  };
}

/** A bare container: the provisioner's hardening flags and the tier's limits, the plain `openclaw gateway` command. */
export async function bareRun(o: {
  name: string;
  port: number;
  label: string;
  limits: { memory_mb: number; cpus: number; pids: number };
  image: string;
  token: string;
  heapMb: number;
}): Promise<void> {
  const mem = `${o.limits.memory_mb}m`;
  await docker(
    ...['run', '-d', '--name', o.name, '--label', o.label, '--user', '10001:10001', '--read-only'],
    ...['--tmpfs', '/tmp:rw,nosuid,nodev,size=64m,mode=1777', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges:true'],
    ...['--pids-limit', String(o.limits.pids), '--memory', mem, '--memory-swap', mem, '--cpus', String(o.limits.cpus)],
    ...['-p', `127.0.0.1:${o.port}:18789`, '--mount', `type=volume,source=${o.name},target=/data,volume-label=${o.label}`],
    ...['-e', `OPENCLAW_GATEWAY_TOKEN=${o.token}`, '-e', `NODE_OPTIONS=--max-old-space-size=${o.heapMb}`],
    ...['--entrypoint', '/usr/local/bin/openclaw', o.image, 'gateway', '--allow-unconfigured', '--bind', 'lan', '--port', '18789', '--auth', 'token'],
  );
}

export async function removeBare(name: string): Promise<void> {
  await dockerQuiet('rm', '-f', '-v', name);
  await dockerQuiet('volume', 'rm', '-f', name);
}

/** Every container and volume with one of these labels, gone (the end of a run). */
export async function removeLabelled(labels: string[]): Promise<void> {
  for (const label of labels) {
    const ids = (await dockerQuiet('ps', '-aq', '--filter', `label=${label}`)).split('\n').filter(Boolean);
    if (ids.length) await dockerQuiet('rm', '-f', '-v', ...ids);
    const vols = (await dockerQuiet('volume', 'ls', '-q', '--filter', `label=${label}`)).split('\n').filter(Boolean);
    if (vols.length) await dockerQuiet('volume', 'rm', '-f', ...vols);
  }
}
