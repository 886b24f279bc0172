import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import https from 'node:https';
import { docker, type Edge } from '@agenthost/testkit';

// What the checkpointed-sleep suites read of an instance's container from the host (sleep-checkpoint*.test.ts).

/** The processes in the container, by command name (`docker top`). */
export const processes = async (container: string): Promise<string[]> =>
  (await docker('top', container, '-o', 'pid,comm'))
    .split('\n')
    .slice(1)
    .filter(Boolean)
    .map((l) => l.trim().split(/\s+/)[1] as string);

/** Host memory the container's cgroup holds (MB, v1 or v2): what a sleeping agent costs the host. */
export async function heldMb(container: string): Promise<number> {
  const pid = (await docker('inspect', '-f', '{{.State.Pid}}', container)).trim();
  const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8')
    .split('\n')
    .find((l) => /^\d+:(memory)?:/.test(l) && (l.includes(':memory:') || l.startsWith('0::')));
  const path = line!.split(':')[2];
  for (const f of [`/sys/fs/cgroup/memory${path}/memory.usage_in_bytes`, `/sys/fs/cgroup${path}/memory.current`]) {
    if (existsSync(f)) return Number(readFileSync(f, 'utf8')) / 2 ** 20;
  }
  throw new Error(`no memory cgroup for ${container}`);
}

/**
 * The agent's long-lived tree in the container's own pid namespace: PID 1 (hold-init), its child (the bootstrap) and
 * their children (the OpenClaw gateway), as pid/ppid/command and start time (clock ticks since boot). A `docker exec`
 * has parent 0 there, and OpenClaw's short-lived helpers are deeper down.
 */
export async function agentTree(container: string): Promise<{ pid: number; comm: string; ppid: number; started: string }[]> {
  const out = await docker('exec', container, 'sh', '-c', 'for p in /proc/[0-9]*; do s=$(cat $p/stat 2>/dev/null) && echo "$s"; done');
  const all = out
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const comm = l.slice(l.indexOf('(') + 1, l.lastIndexOf(')'));
      const f = l.slice(l.lastIndexOf(')') + 2).split(' ');
      return { pid: Number(l.split(' ')[0]), comm, ppid: Number(f[1]), started: f[19]! };
    });
  let level = [1];
  const kept = new Set(level);
  for (let depth = 0; depth < 2; depth++) {
    level = all.filter((p) => level.includes(p.ppid)).map((p) => p.pid);
    for (const pid of level) kept.add(pid);
  }
  return all.filter((p) => kept.has(p.pid)).sort((x, y) => x.pid - y.pid);
}

/** A GET through the edge, timed: ms to its first byte (the answer's head) and to its end. */
export function timedGet(edge: Edge, url: string, token: string): Promise<{ status: number; text: string; firstByteMs: number; totalMs: number }> {
  const u = new URL(url);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: Number(u.port),
        servername: u.hostname,
        path: `${u.pathname}${u.search}`,
        ca: edge.ca(),
        headers: { host: u.host, authorization: `Bearer ${token}` },
        timeout: 180_000,
        agent: false,
      },
      (res) => {
        const firstByteMs = performance.now() - t0;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, firstByteMs, totalMs: performance.now() - t0 }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within 180 s`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * Kill CRIU's page server for the container whose PID 1 is `init` once CRIU's restore there has ended (the agent runs)
 * while the page server still installs its memory, as the OOM killer could; resolves to whether it was still running
 * then. Found by their pid namespace, which they enter: other suites' CRIU processes are left alone.
 */
export async function killPageServerAfterRestore(init: number, timeoutMs = 60_000): Promise<boolean> {
  const ns = readlinkSync(`/proc/${init}/ns/pid`);
  const criu = (verb: string) =>
    readdirSync('/proc').filter((pid) => {
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return /^\d+$/.test(pid) && argv.includes(verb) && argv.some((a) => a.endsWith('/criu')) && readlinkSync(`/proc/${pid}/ns/pid`) === ns;
      } catch {
        return false; // gone meanwhile, or not a process
      }
    });
  const until = async (what: string, ok: () => boolean) => {
    const deadline = Date.now() + timeoutMs;
    while (!ok()) {
      if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms (the container of pid ${init})`);
      await new Promise((r) => setTimeout(r, 2));
    }
  };
  await until('a restore started', () => criu('restore').length > 0);
  await until('the restore ended', () => criu('restore').length === 0);
  const pagers = criu('lazy-pages');
  for (const pid of pagers) process.kill(Number(pid), 'SIGKILL');
  return pagers.length > 0;
}
