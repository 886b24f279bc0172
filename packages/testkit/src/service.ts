import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import path from 'node:path';
import { repoRoot, testLogDir } from './paths.ts';

export interface ServiceProcess {
  name: string;
  /** Fields of the service's "ready" log line (the gateway puts its url there). */
  ready: Record<string, unknown>;
  pid(): number | undefined;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
  /** SIGKILL at once: a crash. */
  kill(): Promise<void>;
  /** Start the same service again with the same environment. */
  start(): Promise<void>;
  /** Lines it logged so far (for tests that look for a log entry). */
  lines(): string[];
}

export interface SpawnOptions {
  env: Record<string, string>;
  /** A label to tell replicas apart in log file names. */
  label?: string;
  readyTimeoutMs?: number;
}

/** Run services/<name>/src/main.ts as its own process, log to .test-logs, resolve when it logs "ready". */
export async function spawnService(name: string, opts: SpawnOptions): Promise<ServiceProcess> {
  const label = opts.label ?? name;
  const dir = path.join(testLogDir, process.env.VITEST_POOL_ID ? `w${process.env.VITEST_POOL_ID}` : 'main');
  mkdirSync(dir, { recursive: true });
  const logFile = createWriteStream(path.join(dir, `${label}-${process.pid}-${Date.now()}.log`), { flags: 'a' });
  const lines: string[] = [];
  let proc: ChildProcess | undefined;
  let ready: Record<string, unknown> = {};

  const start = () =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, [path.join(repoRoot, 'services', name, 'src/main.ts')], {
        cwd: repoRoot,
        env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', ...opts.env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      proc = child;
      // Generous: on the shared 2-core machine (load average 30+) a service took over 30 s to start.
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`${label} did not become ready; last lines:\n${lines.slice(-20).join('\n')}`));
      }, opts.readyTimeoutMs ?? 120_000);
      let buf = '';
      const onData = (chunk: Buffer) => {
        logFile.write(chunk);
        buf += chunk.toString();
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          lines.push(line);
          if (lines.length > 5000) lines.shift();
          if (line.includes('"event":"ready"')) {
            try {
              ready = JSON.parse(line) as Record<string, unknown>;
            } catch {
              ready = {};
            }
            clearTimeout(timer);
            resolve();
          }
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${label} exited with ${code} before ready; last lines:\n${lines.slice(-20).join('\n')}`));
      });
    });

  const waitExit = (signal: NodeJS.Signals) =>
    new Promise<void>((resolve) => {
      const p = proc;
      if (!p || p.exitCode !== null || p.signalCode !== null) return resolve();
      p.once('exit', () => resolve());
      p.kill(signal);
    });

  await start();
  return {
    name,
    get ready() {
      return ready;
    },
    pid: () => proc?.pid,
    stop: () => waitExit('SIGTERM'),
    kill: () => waitExit('SIGKILL'),
    start,
    lines: () => [...lines],
  };
}
