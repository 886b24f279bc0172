import { mkdirSync, openSync, closeSync, statSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

// The kernel may hand the same free port to two back-to-back asks (each probe closes its socket), and test
// files run in parallel processes: a CI run once started NATS and the gateway on one port. So each port given
// out is claimed with a file only one process can create; claims older than a CI run are stale and reused.
const claims = path.join(os.tmpdir(), 'agenthost-test-ports');
const STALE_MS = 2 * 60 * 60 * 1000;

function claim(port: number): boolean {
  mkdirSync(claims, { recursive: true });
  const file = path.join(claims, String(port));
  try {
    closeSync(openSync(file, 'wx'));
    return true;
  } catch {
    const age = Date.now() - (statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0);
    if (age < STALE_MS) return false;
    rmSync(file, { force: true });
    return claim(port);
  }
}

function probe(): Promise<number> {
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

export async function freePort(): Promise<number> {
  for (;;) {
    const port = await probe();
    if (claim(port)) return port;
  }
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
