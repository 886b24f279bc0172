// The baseline of the instances benchmark: a bare `docker run` of the same image with the same limits and flags as the
// provisioner's containers, then the same /readyz polling.
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const exec = promisify(execFile);
export const docker = async (...args: string[]) => (await exec('docker', args, { maxBuffer: 16 << 20 })).stdout.trim();
export const dockerQuiet = (...args: string[]) => docker(...args).catch(() => '');

export interface BareOptions {
  /** Containers started at once. */
  n: number;
  tag: string;
  image: string;
  limits: { memory_mb: number; cpus: number; pids: number };
  network: string;
  label: string;
  /** Host ports port0 … port0 + n - 1. */
  port0: number;
  pollMs: number;
  log(msg: string): void;
}

async function readyz(port: number, deadline: number, pollMs: number): Promise<boolean> {
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      if (r.status === 200) return true;
    } catch {
      /* not yet */
    }
    await sleep(pollMs);
  }
  return false;
}

export async function bareRound(o: BareOptions, round: number): Promise<{ ms: number[]; runMs: number[]; failures: number; ports: number[] }> {
  const ms: number[] = [];
  const runMs: number[] = [];
  let failures = 0;
  const ports: number[] = [];
  await Promise.all(
    Array.from({ length: o.n }, async (_, i) => {
      const name = `ah-bench-bare-${o.tag}-${round}-${i}`;
      const port = o.port0 + i;
      ports.push(port);
      const mem = `${o.limits.memory_mb}m`;
      const t0 = performance.now();
      try {
        // The same flags the provisioner sets (see services/provisioner/src/docker/spec.ts), grouped as it sets them.
        // biome-ignore format: one flag and its value a pair, grouped by concern, reads better than one per line
        await docker(
          'run', '-d', '--name', name, '--label', o.label,
          '--user', '10001:10001', '--read-only', '--tmpfs', '/tmp:rw,nosuid,nodev,size=64m,mode=1777',
          '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges:true', '--ipc', 'private',
          '--pids-limit', String(o.limits.pids), '--memory', mem, '--memory-swap', mem, '--cpus', String(o.limits.cpus),
          '--restart', 'on-failure:3', '--log-driver', 'json-file', '--log-opt', 'max-size=10m', '--log-opt', 'max-file=3',
          '--network', o.network, '-p', `127.0.0.1:${port}:18789`, '--mount', `type=volume,source=${name},target=/data,volume-label=${o.label}`,
          '-e', 'AGENTHOST_BOOTSTRAP_SKIP_KEYS=1', '-e', `AGENTHOST_INSTANCE_ID=${name}`, '-e', 'NODE_OPTIONS=--max-old-space-size=192',
          o.image,
        );
        runMs.push(performance.now() - t0);
        if (await readyz(port, Date.now() + 60_000, o.pollMs)) ms.push(performance.now() - t0);
        else failures++;
      } catch (err) {
        failures++;
        o.log(`bare docker run failed: ${(err as Error).message.split('\n')[0]}`);
      }
    }),
  );
  const ids = (await dockerQuiet('ps', '-aq', '--filter', `label=${o.label}`)).split('\n').filter(Boolean);
  if (ids.length) await dockerQuiet('rm', '-f', '-v', ...ids);
  for (let i = 0; i < o.n; i++) await dockerQuiet('volume', 'rm', '-f', `ah-bench-bare-${o.tag}-${round}-${i}`);
  return { ms, runMs, failures, ports };
}
