import { setTimeout as sleep } from 'node:timers/promises';
import { randomInt } from 'node:crypto';
import { closeSync, mkdirSync, openSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

// A port for a test's server, free now and for the rest of the run. Two things broke that before: the kernel
// handed the same free port to two back-to-back asks (a CI run started NATS and the gateway on one port), and a
// port from the kernel's ephemeral range can be taken by any `listen(0)` or outgoing connection before its
// server binds it. So ports come from below the ephemeral range (32768-60999 on Linux), are checked bindable on
// every address, and are claimed with a file only one process can create (test files run in parallel
// processes); claims older than a CI run are stale and reused. The fixed ports of the suites are all below 20000.
const FIRST = 21000;
const LAST = 32000;
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

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '0.0.0.0', () => srv.close(() => resolve(true)));
  });
}

export async function freePort(): Promise<number> {
  for (let i = 0; i < 2000; i++) {
    const port = randomInt(FIRST, LAST);
    if ((await bindable(port)) && claim(port)) return port;
  }
  throw new Error(`no free port between ${FIRST} and ${LAST}`);
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
    await sleep(50);
  }
  throw new Error(`port ${port} did not open within ${timeoutMs} ms`);
}
