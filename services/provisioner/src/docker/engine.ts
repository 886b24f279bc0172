import Docker from 'dockerode';
import { AppError, containerName, inSpan, type Logger } from '@agenthost/shared';
import { observeDockerError } from '../metrics.ts';
import { describe, dockerStatus, o } from './call.ts';

/**
 * dockerode behind short timeouts and a health flag.
 *
 * Every call goes through run() and is aborted after its timeout (503 DOCKER_UNAVAILABLE). A
 * connection-level failure (socket missing, refused, reset) marks the engine down at once; a hang is
 * detected by a ping every second (two missed 2 s pings). A slow call alone does not: a loaded but
 * alive engine can take seconds to start containers. While the engine is down, calls fail at once
 * with 503 and calls in flight are aborted; the ping notices recovery within about a second.
 * Errors that Docker itself answered (404, 409, ...) pass through unchanged so callers can handle them.
 */
export class DockerEngine {
  readonly docker: Docker;
  private readonly log: Logger;
  private readonly timeoutMs: number;
  private up = true;
  private pingFailures = 0;
  private monitor: NodeJS.Timeout | undefined;
  private pinging = false;
  private readonly upListeners: (() => void)[] = [];
  private readonly inFlight = new Set<AbortController>();

  constructor(opts: { host: string; timeoutMs: number; log: Logger }) {
    this.docker = new Docker(dockerOptions(opts.host));
    this.timeoutMs = opts.timeoutMs;
    this.log = opts.log;
  }

  get available(): boolean {
    return this.up;
  }

  /** Called each time the engine comes back after being down. */
  onRecovery(fn: () => void): void {
    this.upListeners.push(fn);
  }

  /** Fail fast when the engine is known to be down. */
  assertUp(): void {
    if (!this.up) throw unavailable();
  }

  /** Every Engine API call: a span of the request it serves, and counted when it fails (`what` is a fixed operation name). */
  run<T>(what: string, fn: (signal: AbortSignal) => Promise<T>, timeoutMs = this.timeoutMs): Promise<T> {
    return inSpan(`docker ${what}`, { 'agenthost.docker.operation': what }, () =>
      this.call(what, fn, timeoutMs).catch((err: unknown) => {
        observeDockerError(what, err instanceof AppError ? 'unavailable' : 'answered');
        throw err;
      }),
    );
  }

  /**
   * Change an instance container's limits live (`docker update`): its CPU share, or its memory and memory+swap.
   * `timeoutMs`: a lowered memory limit returns once the kernel has reclaimed down to it, which takes seconds.
   */
  updateLimits(id: string, limits: { NanoCpus: number } | { Memory: number; MemorySwap: number }, timeoutMs?: number): Promise<unknown> {
    return this.run('container update', (abortSignal) => this.docker.getContainer(containerName(id)).update(o({ ...limits, abortSignal })), timeoutMs);
  }

  private async call<T>(what: string, fn: (signal: AbortSignal) => Promise<T>, timeoutMs: number): Promise<T> {
    this.assertUp();
    const ac = new AbortController();
    this.inFlight.add(ac);
    let timer: NodeJS.Timeout | undefined;
    const stopped = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        ac.abort();
        reject(Object.assign(new Error(`docker ${what} timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' }));
      }, timeoutMs);
      ac.signal.addEventListener('abort', () => reject(Object.assign(new Error(`docker ${what} aborted: engine down`), { code: 'ECONNABORTED' })), {
        once: true,
      });
    });
    try {
      return await Promise.race([fn(ac.signal), stopped]);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'ETIMEDOUT') void this.suspect(what);
      if (code === 'ETIMEDOUT' || code === 'ECONNABORTED') throw unavailable(err);
      if (isEngineUnreachable(err)) {
        this.markDown(what, err);
        throw unavailable(err);
      }
      // The engine answered but failed (a swarm manager mid-election, a conflict inside it): the caller's
      // 503 to retry, never a 500. The engine stays up.
      if ((dockerStatus(err) ?? 0) >= 500) throw unavailable(err);
      throw err;
    } finally {
      clearTimeout(timer);
      this.inFlight.delete(ac);
    }
  }

  /** Start in the down state (the first ping failed); the monitor flips it back. */
  noteDown(): void {
    this.up = false;
  }

  private markDown(what: string, err: unknown): void {
    if (this.up) this.log.error({ op: what, err: describe(err) }, 'docker engine unreachable; failing fast until it answers again');
    this.up = false;
    for (const ac of this.inFlight) ac.abort();
  }

  /** A call timed out: slow or hung? A ping that fails too means hung. */
  private async suspect(what: string): Promise<void> {
    if (this.up && !(await this.ping(1000))) this.markDown(what, new Error('call timed out and the engine does not answer pings'));
  }

  /** Ping now; true when the engine answers. */
  async ping(timeoutMs = 2000): Promise<boolean> {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), timeoutMs);
    try {
      await (this.docker as unknown as { ping(opts: object): Promise<unknown> }).ping(o({ abortSignal: ac.signal }));
      return true;
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Ping every second: a hung engine is marked down after two missed pings, a recovered one up at once. */
  startMonitor(): void {
    const tick = async () => {
      if (this.pinging) return;
      this.pinging = true;
      try {
        const ok = await this.ping(2000);
        if (ok) {
          this.pingFailures = 0;
          if (!this.up) {
            this.up = true;
            this.log.info('docker engine reachable again');
            for (const fn of this.upListeners) fn();
          }
        } else if (++this.pingFailures >= 2 && this.up) {
          this.markDown('ping', new Error('no answer to ping'));
        }
      } finally {
        this.pinging = false;
      }
    };
    this.monitor = setInterval(() => void tick(), 1000);
    this.monitor.unref();
  }

  stopMonitor(): void {
    clearInterval(this.monitor);
  }
}

function dockerOptions(host: string): Docker.DockerOptions {
  if (!host) return {};
  if (host.startsWith('unix://')) return { socketPath: host.slice('unix://'.length) };
  if (host.startsWith('/')) return { socketPath: host };
  const u = new URL(host.includes('//') ? host : `tcp://${host}`);
  return { host: u.hostname, port: Number(u.port || 2375), protocol: u.protocol === 'https:' ? 'https' : 'http' };
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOENT',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EACCES',
  'ENOTSOCK',
  'ABORT_ERR',
  'UND_ERR_SOCKET',
]);

function isEngineUnreachable(err: unknown): boolean {
  const e = err as { code?: string; name?: string; statusCode?: number } | undefined;
  if (!e || typeof e !== 'object') return false;
  if (e.statusCode !== undefined) return false; // Docker answered
  return (e.code !== undefined && UNREACHABLE_CODES.has(e.code)) || e.name === 'AbortError';
}

const unavailable = (cause?: unknown) => new AppError('DOCKER_UNAVAILABLE', undefined, { retryable: true, retryAfter: 2, cause });

/** The engine's API version (e.g. "1.41") is at least major.minor. */
export function apiAtLeast(version: string, major: number, minor: number): boolean {
  const [a = 0, b = 0] = version.split('.').map(Number);
  return a > major || (a === major && b >= minor);
}
