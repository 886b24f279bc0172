import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readlinkSync } from 'node:fs';
import { promisify } from 'node:util';
import { GenericContainer, Wait, type StartedTestContainer } from 'testcontainers';
import { freePort } from './ports.ts';

// The tests' Postgres and NATS run as containers (testcontainers) of the images the swarm deployment uses,
// built offline by `deploy/images/build.sh infra`: no registry can be pulled from here, so Ryuk (the reaper,
// pulled from Docker Hub) is off and each container carries the pid of the test process that made it; the
// next run's global setup removes those whose process is gone.
process.env.TESTCONTAINERS_RYUK_DISABLED = 'true';

export const POSTGRES_IMAGE = 'agenthost/postgres:15';
export const NATS_IMAGE = 'agenthost/nats:2.10';
/**
 * The test process that made a container, as `<pid namespace>:<pid>`: a pid means something only in its own
 * namespace, and on a shared machine other runs may live in other ones (where that pid is unknown, so a run
 * there took our live containers for orphans). A run removes only the orphans of its own namespace.
 */
const OWNER = 'agenthost.test.owner';
const PID_NS = (() => {
  try {
    return readlinkSync('/proc/self/ns/pid').replace(/\D/g, '');
  } catch {
    return 'host';
  }
})();

const run = promisify(execFile);

/**
 * Host networking: the servers listen on the host's loopback like the processes they replace, at the port the
 * test chose, with no userland proxy in the path (the benchmarks measure through them). A fixed port also lets a
 * test stop a server and start a new container on the same port and data.
 */
function hostContainer(image: string): GenericContainer {
  return new GenericContainer(image)
    .withNetworkMode('host')
    .withLabels({ [OWNER]: `${PID_NS}:${process.pid}` })
    .withStartupTimeout(120_000);
}

export interface PostgresContainer {
  /** The admin's URL of the server's postgres database. */
  url: string;
  stop(): Promise<void>;
}

/** Postgres 15 for a whole test run (each suite makes its own database in it); fsync off: test data is disposable. */
export async function startPostgres(): Promise<PostgresContainer> {
  const port = await freePort();
  const password = randomBytes(18).toString('base64url');
  const container = await hostContainer(POSTGRES_IMAGE)
    .withEnvironment({ POSTGRES_PASSWORD_FILE: '/run/agenthost-test/pw', PG_SCHEMAS: ' ', PG_DATABASE: 'agenthost' })
    .withCopyContentToContainer([{ content: password, target: '/run/agenthost-test/pw', mode: 0o444 }])
    .withCommand(['-c', 'listen_addresses=127.0.0.1', '-c', `port=${port}`, '-c', 'fsync=off', '-c', 'synchronous_commit=off'])
    // No service roles in the image's own database (a blank list): each suite's database makes its own. The
    // entrypoint first starts a socket-only server: ready means accepting TCP.
    .withWaitStrategy(Wait.forSuccessfulCommand(`/usr/lib/postgresql/15/bin/pg_isready -q -h 127.0.0.1 -p ${port}`))
    .start();
  return { url: `postgres://agenthost:${password}@127.0.0.1:${port}/postgres`, stop: () => stopContainer(container) };
}

/** nats-server with the configuration file the test wrote; dirs are the host paths that file names. */
export async function startNatsContainer(configFile: string, dirs: string[]): Promise<StartedTestContainer> {
  return (
    hostContainer(NATS_IMAGE)
      // The configuration, seeds and TLS key are the test process's own files (root, 0600).
      .withUser('0:0')
      .withBindMounts(dirs.map((d) => ({ source: d, target: d, mode: 'rw' as const })))
      .withCommand(['-c', configFile])
      .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
      .start()
  );
}

/** SIGTERM, then the container goes (its bind-mounted data stays on the host). */
export async function stopContainer(c: StartedTestContainer): Promise<void> {
  await c.stop({ timeout: 10_000, remove: true, removeVolumes: true });
}

/** The host pid of a container's main process (benchmarks read its CPU time from /proc). */
export async function containerPid(c: StartedTestContainer): Promise<number> {
  const { stdout } = await run('docker', ['inspect', '-f', '{{.State.Pid}}', c.getId()]);
  return Number(stdout.trim());
}

/** Removes the test containers whose test process is gone (a run that was killed). Others' stay. */
export async function removeOrphanContainers(): Promise<number> {
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=${OWNER}`, '--format', `{{.ID}} {{.Label "${OWNER}"}}`]);
  const dead = stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' '))
    .filter(([, owner]) => {
      const [ns, pid] = (owner ?? '').split(':');
      return ns === PID_NS && !alive(Number(pid));
    })
    .map(([id]) => id!);
  if (dead.length) await run('docker', ['rm', '-f', '-v', ...dead]);
  return dead.length;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process is there, run by another user (another engineer's run on a shared machine).
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
