import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

// Service processes for the benchmark. Unlike the testkit (which pipes every log line through the
// test process), their output goes straight to a file, so the load generator in this process does
// not pay for the services' logging.

export interface BenchProcess {
  name: string;
  pid: number;
  ready: Record<string, unknown>;
  logFile: string;
  stop(): Promise<void>;
}

export async function spawnLogged(
  repo: string,
  name: string,
  env: Record<string, string>,
  logDir: string,
  label = name,
  execArgv: string[] = [],
): Promise<BenchProcess> {
  mkdirSync(logDir, { recursive: true });
  const logFile = path.join(logDir, `${label}-${Date.now()}.log`);
  const fd = openSync(logFile, 'a');
  const child: ChildProcess = spawn(process.execPath, [...execArgv, path.join(repo, 'services', name, 'src/main.ts')], {
    cwd: repo,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  let exited = false;
  child.once('exit', () => (exited = true));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const text = readFileSync(logFile, 'utf8');
    const line = text.split('\n').find((l) => l.includes('"event":"ready"'));
    if (line) {
      return {
        name,
        pid: child.pid ?? 0,
        ready: JSON.parse(line) as Record<string, unknown>,
        logFile,
        stop: () =>
          new Promise<void>((resolve) => {
            if (exited) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }),
      };
    }
    if (exited || Date.now() > deadline) throw new Error(`${label} did not become ready:\n${text.split('\n').slice(-20).join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A process's name and the fields of /proc/<pid>/stat after it (Linux); undefined once it has ended. */
function stat(pid: number | string): { comm: string; fields: string[] } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return { comm: text.slice(text.indexOf('(') + 1, text.lastIndexOf(')')), fields: text.slice(text.lastIndexOf(')') + 2).split(' ') };
  } catch {
    return undefined;
  }
}

/** CPU seconds (user + system) a process has used so far. */
export function cpuSeconds(pid: number): number {
  const f = stat(pid)?.fields;
  return f ? (Number(f[11]) + Number(f[12])) / 100 : 0;
}

/**
 * CPU seconds every process named `comm` (e.g. postgres: the server and all its backends) has used so far, with
 * their children that ended (a backend whose connection closed moves into its server's count: the sum only grows).
 */
export function cpuSecondsOf(comm: string): number {
  let total = 0;
  for (const pid of readdirSync('/proc')) {
    // Not a process, another one, or one that ended while the list was read: not counted.
    const s = /^\d+$/.test(pid) ? stat(pid) : undefined;
    if (s?.comm !== comm) continue;
    const f = s.fields;
    total += (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
  }
  return total;
}

/** CPU seconds the whole machine has been busy (every core: user, system, interrupts, steal), from /proc/stat. */
export function machineCpuSeconds(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal
  return (f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!) / 100;
}

/** A node process that prints one JSON line when it is ready (its port, say): that line, and the child. */
export function spawnReady(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ ready: Record<string, unknown>; child: ChildProcess }> {
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve({ ready: JSON.parse(d.toString()) as Record<string, unknown>, child }));
    child.once('exit', (c) => reject(new Error(`${args.join(' ')} exited with ${c}`)));
  });
}

/** The bare node:http JSON server (bare-server.ts), the baseline of the gateway benchmark. */
export async function startBare(): Promise<{ url: string; pid: number; stop: () => void }> {
  const { ready, child } = await spawnReady([path.join(path.dirname(new URL(import.meta.url).pathname), 'bare-server.ts')]);
  return { url: `http://127.0.0.1:${String(ready.port)}/api/subscription/status`, pid: child.pid ?? 0, stop: () => child.kill('SIGTERM') };
}
