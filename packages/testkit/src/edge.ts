import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { waitForPort } from './ports.ts';
import { repoRoot, testLogDir } from './paths.ts';
import { spawnService, type ServiceProcess } from './service.ts';
import type { Stack } from './stack.ts';
import { waitFor } from './wait.ts';

export interface EdgeOptions {
  /** HTTPS and HTTP ports of this suite's edge (each suite its own, so suites run in parallel). */
  httpsPort: number;
  httpPort: number;
  domain?: string;
  /** More settings (EDGE_BODY_LIMIT_BYTES, ...). */
  env?: Record<string, string>;
}

export interface EdgeResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: Record<string, unknown>;
}

export interface Edge {
  domain: string;
  httpsPort: number;
  httpPort: number;
  /** The local CA's root certificate (PEM), as a client that trusts the edge is given it. */
  ca(): string;
  caFile: string;
  /** https://<domain>:<port> */
  origin: string;
  hostOf(instanceId: string): string;
  /** One HTTPS request to the edge (host names under .localhost are sent to 127.0.0.1, as browsers and curl do). */
  request(url: string, init?: { method?: string; headers?: Record<string, string>; body?: string | Buffer; timeoutMs?: number }): Promise<EdgeResponse>;
  /** A WebSocket through the edge, open once the upgrade is answered. */
  websocket(url: string, headers?: Record<string, string>): Promise<EdgeWebSocket>;
  keeper: ServiceProcess;
  /** Stop / start Caddy itself (the route keeper keeps running). */
  stopCaddy(): Promise<void>;
  startCaddy(): Promise<void>;
  stop(): Promise<void>;
}

/** Caddy with the edge's base configuration and the route keeper, for one suite, in front of a stack's gateways. */
export async function startEdge(stack: Stack, opts: EdgeOptions): Promise<Edge> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'agenthost-edge-'));
  const domain = opts.domain ?? 'agenthost.localhost';
  const env: Record<string, string> = {
    EDGE_DOMAIN: domain,
    EDGE_HTTPS_PORT: String(opts.httpsPort),
    EDGE_HTTP_PORT: String(opts.httpPort),
    EDGE_BIND: '127.0.0.1',
    EDGE_ADMIN_SOCKET: path.join(dir, 'admin.sock'),
    EDGE_KEEPER_SOCKET: path.join(dir, 'keeper.sock'),
    EDGE_DATA_DIR: path.join(dir, 'data'),
    EDGE_GATEWAYS: stack.gateways.map((g) => new URL(String(g.ready.url)).host).join(','),
    ...opts.env,
  };
  const configFile = path.join(dir, 'caddy.json');
  writeFileSync(configFile, await edgeBaseConfig(env));
  const caFile = path.join(dir, 'data', 'pki', 'authorities', 'local', 'root.crt');
  const logDir = path.join(testLogDir, process.env.VITEST_POOL_ID ? `w${process.env.VITEST_POOL_ID}` : 'main');
  mkdirSync(logDir, { recursive: true });
  let caddy: ChildProcess | undefined;
  const startCaddy = async () => {
    const log = createWriteStream(path.join(logDir, `caddy-${process.pid}-${Date.now()}.log`), { flags: 'a' });
    const child = spawn('caddy', ['run', '--config', configFile], {
      env: { PATH: process.env.PATH ?? '', HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.pipe(log);
    child.stderr!.pipe(log);
    caddy = child;
    await waitForPort(opts.httpsPort, 20_000);
    await waitFor('the local CA root certificate', async () => existsSync(caFile), 20_000);
  };
  const stopCaddy = async () => {
    const p = caddy;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGTERM');
    });
  };
  await startCaddy();
  let keeper: ServiceProcess;
  try {
    keeper = await spawnService('edge', {
      env: { ...stack.nats.envFor('edge'), NATS_REQUEST_TIMEOUT_MS: '3000', EDGE_RESYNC_SECONDS: '2', ...env },
      label: 'edge',
    });
  } catch (err) {
    await stopCaddy();
    throw err;
  }
  const ca = () => readFileSync(caFile, 'utf8');
  const target = (url: string) => {
    const u = new URL(url);
    return { u, port: Number(u.port || 443), servername: u.hostname };
  };
  return {
    domain,
    httpsPort: opts.httpsPort,
    httpPort: opts.httpPort,
    ca,
    caFile,
    origin: `https://${domain}:${opts.httpsPort}`,
    hostOf: (id) => `${id}.${domain}`,
    keeper,
    stopCaddy,
    startCaddy,
    request: (url, init = {}) => requestVia(url, { ...init, address: '127.0.0.1', ca: ca() }),
    websocket: (url, headers = {}) => websocket(target(url), ca(), headers),
    async stop() {
      await keeper.stop();
      await stopCaddy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The edge's base Caddy configuration (JSON) for these settings, as deploy/start.sh makes it: printed by the edge's
 * own services/edge/src/write-config.ts, run as a process (the test kit imports no service).
 */
export async function edgeBaseConfig(settings: Record<string, string>): Promise<string> {
  const script = path.join(repoRoot, 'services', 'edge', 'src', 'write-config.ts');
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [script], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', ...settings },
      timeout: 60_000,
    });
    return stdout;
  } catch (err) {
    throw new Error(`the edge's base configuration: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`);
  }
}

/**
 * One HTTPS request to `url`, sent to `address` (the name is kept for TLS and Host, as a client whose DNS gave that
 * address sends it), trusting `ca`; the answer whole, with its JSON when it is JSON.
 */
export function requestVia(
  url: string,
  o: { address: string; ca: string; method?: string; headers?: Record<string, string>; body?: string | Buffer; timeoutMs?: number },
): Promise<EdgeResponse> {
  const u = new URL(url);
  const timeoutMs = o.timeoutMs ?? 15_000;
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: o.address,
        port: Number(u.port || 443),
        servername: u.hostname,
        path: `${u.pathname}${u.search}`,
        method: o.method ?? 'GET',
        ca: o.ca,
        headers: { host: u.host, ...o.headers },
        timeout: timeoutMs,
        agent: false,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          let json: Record<string, unknown> = {};
          try {
            json = JSON.parse(text) as Record<string, unknown>;
          } catch {
            // not JSON
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} through ${o.address} within ${timeoutMs / 1000} s`)));
    req.on('error', reject);
    req.end(o.body);
  });
}

export interface EdgeWebSocket {
  send(text: string): void;
  /** The next text message (in order of arrival). */
  receive(): Promise<string>;
  close(): void;
}

/** A bare WebSocket client over TLS (RFC 6455), enough to see an upgrade and messages through the edge. */
function websocket(t: { u: URL; port: number; servername: string }, ca: string, headers: Record<string, string>): Promise<EdgeWebSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: t.port, servername: t.servername, ca, ALPNProtocols: ['http/1.1'] });
    const queue: string[] = [];
    const waiting: Array<(m: string) => void> = [];
    const timer = setTimeout(() => (socket.destroy(), reject(new Error(`WebSocket ${t.u.href}: no upgrade within 15 s`))), 15_000);
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.once('secureConnect', () =>
      socket.write(
        `GET ${t.u.pathname}${t.u.search} HTTP/1.1\r\nHost: ${t.u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n${extra}\r\n`,
      ),
    );
    let buf = Buffer.alloc(0);
    let upgraded = false;
    const ws: EdgeWebSocket = {
      send: (text) => void socket.write(maskedFrame(text)),
      receive: () =>
        new Promise((res, rej) => {
          const m = queue.shift();
          if (m !== undefined) return res(m);
          const wait = setTimeout(() => rej(new Error(`WebSocket ${t.u.href}: no message within 15 s`)), 15_000);
          waiting.push((msg) => (clearTimeout(wait), res(msg)));
        }),
      close: () => void socket.end(),
    };
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (!upgraded) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString();
        clearTimeout(timer);
        if (!head.startsWith('HTTP/1.1 101')) {
          socket.destroy();
          return reject(new Error(`no upgrade: ${head.split('\r\n')[0]}`));
        }
        upgraded = true;
        buf = buf.subarray(end + 4);
        resolve(ws);
      }
      while (buf.length >= 2) {
        let len = buf[1]! & 0x7f;
        let off = 2;
        if (len === 126) {
          if (buf.length < 4) return;
          len = buf.readUInt16BE(2);
          off = 4;
        }
        if (buf.length < off + len) return;
        const msg = buf.subarray(off, off + len).toString();
        buf = buf.subarray(off + len);
        const w = waiting.shift();
        if (w) w(msg);
        else queue.push(msg);
      }
    });
    socket.on('error', (err) => (clearTimeout(timer), reject(err)));
  });
}

function maskedFrame(text: string): Buffer {
  const data = Buffer.from(text);
  const mask = randomBytes(4);
  const head = data.length < 126 ? Buffer.from([0x81, 0x80 | data.length]) : Buffer.from([0x81, 0x80 | 126, data.length >> 8, data.length & 255]);
  const body = Buffer.from(data.map((b, i) => b ^ mask[i % 4]!));
  return Buffer.concat([head, mask, body]);
}
