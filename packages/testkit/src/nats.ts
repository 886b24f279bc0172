import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

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
  stop(): Promise<void>;
  pause(): Promise<void>;
  /** Start it again on the same port and store (JetStream data survives). */
  restart(): Promise<void>;
}

/** A private nats-server with JetStream for one test suite. */
export async function startNats(): Promise<NatsServer> {
  const port = await freePort();
  const storeDir = mkdtempSync(path.join(os.tmpdir(), 'agenthost-nats-'));
  let proc: ChildProcess | undefined;
  const launch = async () => {
    proc = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', storeDir], { stdio: 'ignore' });
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
    url: `nats://127.0.0.1:${port}`,
    port,
    restart: launch,
    /** Stop the server but keep its store, so restart() brings JetStream back with its data. */
    pause: halt,
    async stop() {
      await halt();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}
