import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { connect, type ConnectionOptions, type NatsConnection } from 'nats';
import { ensureNatsTls, natsOptions, OPERATOR, writeNatsAuth } from '@agenthost/shared';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export async function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`port ${port} did not open within ${timeoutMs} ms`);
}

export interface NatsServer {
  url: string;
  port: number;
  /** NATS_URL, NATS_NKEY_SEED_FILE and NATS_CA_FILE for one service: its own identity only. */
  envFor(service: string): Record<string, string>;
  /** Connection options of an identity (default: the operator, who may use every subject). */
  options(who?: string): ConnectionOptions;
  /** The server's process id (benchmarks measure its CPU). */
  pid(): number | undefined;
  /** A connection as an identity (default: the operator); the caller closes it. */
  connect(who?: string): Promise<NatsConnection>;
  stop(): Promise<void>;
  pause(): Promise<void>;
  /** Start it again on the same port and store (JetStream data survives). */
  restart(): Promise<void>;
}

/**
 * A private nats-server with JetStream for one test suite, configured as deploy configures it: TLS
 * (one CA per test run) and one nkey user per service with the permissions of the shared table.
 */
export async function startNats(): Promise<NatsServer> {
  const port = await freePort();
  const storeDir = mkdtempSync(path.join(os.tmpdir(), 'agenthost-nats-'));
  const tls = ensureNatsTls(path.join(os.tmpdir(), 'agenthost-nats-tls'));
  const auth = writeNatsAuth(path.join(storeDir, 'auth'), { host: '127.0.0.1', port, storeDir: path.join(storeDir, 'js'), tls });
  const url = `nats://127.0.0.1:${port}`;
  const options = (who: string = OPERATOR) => natsOptions({ url, seedFile: auth.seeds[who]!, caFile: tls.ca, ...(who === OPERATOR ? {} : { service: who }) });
  let proc: ChildProcess | undefined;
  const launch = async () => {
    proc = spawn('nats-server', ['-c', auth.configFile], { stdio: 'ignore' });
    await waitForPort(port);
  };
  const halt = async () => {
    const p = proc;
    if (!p || p.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGTERM');
    });
  };
  await launch();
  return {
    url,
    port,
    envFor: (service) => ({ NATS_URL: url, NATS_NKEY_SEED_FILE: auth.seeds[service]!, NATS_CA_FILE: tls.ca }),
    options,
    connect: (who) => connect(options(who)),
    pid: () => proc?.pid,
    restart: launch,
    /** Stop the server but keep its store, so restart() brings JetStream back with its data. */
    pause: halt,
    async stop() {
      await halt();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}
