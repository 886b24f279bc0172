// Key hot reload, bootstrap side: src/bootstrap.mjs as a real process against a local gateway (retrieve, watch,
// applied) and a small agent that resolves its keys through keys-resolver.mjs, as OpenClaw's exec provider does.
// Also the warm pool's late credentials (AGENTHOST_CREDENTIALS=stdin-late): the agent runs before they arrive on stdin.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { seal } from './helpers.ts';

const BOOTSTRAP = fileURLToPath(new URL('../src/bootstrap.mjs', import.meta.url));
const RESOLVER = fileURLToPath(new URL('../src/keys-resolver.mjs', import.meta.url));
const NODE = process.execPath;
const instanceKeyBytes = randomBytes(32);
const INSTANCE_ID = 'hot-reload-test-1';
const INSTANCE_SECRET = `secret-${randomBytes(16).toString('hex')}`;
const CREDENTIALS = `${JSON.stringify({ instance_secret: INSTANCE_SECRET, instance_key: instanceKeyBytes.toString('base64') })}\n`;

let keys: Record<string, string> = {};
const watches = new Set<http.ServerResponse>();
const reports: { change_id: string; applied: boolean; reason?: string }[] = [];
let requests: { url: string; headers: http.IncomingHttpHeaders }[] = [];
let gateway: http.Server;
let base: string;

const sealed = () => Object.fromEntries(Object.entries(keys).map(([n, v]) => [n, seal(instanceKeyBytes, INSTANCE_ID, n, v)]));
const push = (changeId: string | null) => {
  for (const w of watches) w.write(`event: keys\ndata: ${JSON.stringify({ keys: sealed(), change_id: changeId })}\n\n`);
};

beforeAll(async () => {
  gateway = http.createServer((req, res) => {
    requests.push({ url: req.url ?? '', headers: req.headers });
    const authed = req.headers['x-instance-id'] === INSTANCE_ID && req.headers['x-instance-secret'] === INSTANCE_SECRET;
    if (req.url === '/api/keys/retrieve' || req.url === '/api/keys/watch') {
      if (!authed) return res.writeHead(401).end('{}');
      if (req.url.endsWith('retrieve')) return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: sealed() }));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      watches.add(res);
      res.on('close', () => watches.delete(res));
      return push(null);
    }
    if (req.url === '/api/keys/applied' && req.method === 'POST') {
      let body = '';
      req.on('data', (c) => (body += c));
      return req.on('end', () => {
        reports.push(JSON.parse(body));
        res.writeHead(200).end('{}');
      });
    }
    res.writeHead(404).end('{}');
  });
  await new Promise<void>((r) => gateway.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/api/keys`;
});
afterAll(() => {
  gateway.closeAllConnections();
  gateway.close();
});

// The agent: resolves its keys at start and on POST /reload (failing on purpose while FAIL is set), shows them on GET
// with what it read on its stdin; /exit ends it with code 7.
const AGENT = `
const http = require("node:http"); const { execFileSync } = require("node:child_process");
let keys = {}; let fail = false; let stdin = "";
process.stdin.on("data", (d) => (stdin += d));
const resolve = () => { keys = JSON.parse(execFileSync(${JSON.stringify(NODE)}, [${JSON.stringify(RESOLVER)}, "--all"], { env: { AGENTHOST_KEYS_SOCKET: process.env.AGENTHOST_KEYS_SOCKET, AGENTHOST_KEYS_TOKEN: process.env.AGENTHOST_KEYS_TOKEN } })).values; };
resolve();
http.createServer((req, res) => {
  if (req.url === "/fail") { fail = true; return res.end("{}"); }
  if (req.url === "/exit") { res.end("{}"); return setTimeout(() => process.exit(7), 50); }
  if (req.url === "/reload") { if (fail) { res.statusCode = 500; return res.end(JSON.stringify({ ok: false, reason: "failing on purpose" })); } resolve(); return res.end(JSON.stringify({ ok: true })); }
  res.end(JSON.stringify({ keys, pid: process.pid, envValues: Object.values(process.env), stdin }));
}).listen(Number(process.env.AGENT_PORT), "127.0.0.1");`;

let child: ChildProcess | undefined;
let stdout = '';
let stderr = '';
let closed: number | null | undefined; // the bootstrap's exit code once it and its output have ended
afterEach(async () => {
  child?.kill('SIGTERM');
  if (child) await until('the bootstrap to end', async () => closed);
  child = undefined;
  requests = [];
});

/** Starts the bootstrap with hot reload on (`env` overrides; AGENTHOST_RELOAD_URL '' turns it off), `stdin` 'pipe' to write on it. */
function startBootstrap(port: number, env: Record<string, string>, stdin: 'ignore' | 'pipe' = 'ignore', command = ['-e', AGENT]): ChildProcess {
  stdout = '';
  stderr = '';
  closed = undefined;
  child = spawn(NODE, [BOOTSTRAP, NODE, ...command], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      AGENTHOST_INSTANCE_ID: INSTANCE_ID,
      AGENTHOST_KEYS_URL: `${base}/retrieve`,
      AGENTHOST_KEYS_WATCH: '1',
      AGENTHOST_RELOAD_URL: `http://127.0.0.1:${port}/reload`,
      AGENT_PORT: String(port),
      ...env,
    },
    stdio: [stdin, 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  child.on('close', (code) => (closed = code));
  return child;
}

type Seen = { keys: Record<string, string>; pid: number; envValues: string[]; stdin: string };
const agentAt = (port: number) => async () => (await (await fetch(`http://127.0.0.1:${port}/`)).json()) as Seen;
const randomPort = () => 20000 + Math.floor(Math.random() * 20000);
const logLines = () =>
  stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: string; msg: string; [k: string]: unknown });

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('key hot reload (bootstrap)', () => {
  it("hands changed keys to the running agent through its resolver, reports each change, never in the agent's environment", async () => {
    keys = { OPENAI_API_KEY: 'sk-first' };
    const port = randomPort();
    startBootstrap(port, { AGENTHOST_INSTANCE_SECRET: INSTANCE_SECRET, AGENTHOST_INSTANCE_KEY: instanceKeyBytes.toString('base64') });
    const agent = agentAt(port);
    const first = await until('the agent', agent);
    expect(first.keys).toEqual({ OPENAI_API_KEY: 'sk-first' });
    expect(first.envValues).not.toContain('sk-first');
    expect(first.envValues).not.toContain(INSTANCE_SECRET);
    await until('the watch', async () => (watches.size === 1 ? true : undefined));

    keys = { OPENAI_API_KEY: 'sk-second', ANTHROPIC_API_KEY: 'sk-ant' };
    push('change-aaaaaaaaaaaaaaaaaaaaaa');
    await until('the report', async () => (reports.length === 1 ? true : undefined));
    expect(reports[0]).toEqual({ instance_id: INSTANCE_ID, change_id: 'change-aaaaaaaaaaaaaaaaaaaaaa', applied: true });
    const second = await agent();
    expect(second.keys).toEqual(keys);
    expect(second.pid).toBe(first.pid);

    // A reload the agent refuses is reported with its reason; the agent keeps what it had.
    await fetch(`http://127.0.0.1:${port}/fail`);
    keys = { OPENAI_API_KEY: 'sk-third' };
    push('change-bbbbbbbbbbbbbbbbbbbbbb');
    await until('the second report', async () => (reports.length === 2 ? true : undefined), 15_000);
    expect(reports[1]).toMatchObject({ change_id: 'change-bbbbbbbbbbbbbbbbbbbbbb', applied: false, reason: 'failing on purpose' });
    expect((await agent()).keys).toEqual({ OPENAI_API_KEY: 'sk-second', ANTHROPIC_API_KEY: 'sk-ant' });

    for (const s of [INSTANCE_SECRET, 'sk-first', 'sk-second', 'sk-third', 'sk-ant']) expect(stderr).not.toContain(s);
  }, 30_000);
});

describe('late credentials (AGENTHOST_CREDENTIALS=stdin-late, a warm pool agent)', () => {
  const LATE = { AGENTHOST_CREDENTIALS: 'stdin-late' };
  const noSecrets = (text: string) => {
    for (const s of [INSTANCE_SECRET, instanceKeyBytes.toString('base64'), ...Object.values(keys)]) expect(text).not.toContain(s);
  };

  it('starts the agent before the credentials arrive, then opens the key watch with them and has the agent reload its keys', async () => {
    keys = { OPENAI_API_KEY: 'sk-late-owner' };
    const port = randomPort();
    const bootstrap = startBootstrap(port, LATE, 'pipe');
    const agent = agentAt(port);
    // Nothing written on stdin yet: the agent answers, keyless, and the gateway was never asked.
    const first = await until('the agent', agent);
    expect(first.keys).toEqual({});
    expect(requests).toEqual([]);
    expect(logLines().find((l) => l.msg === 'starting agent')).toMatchObject({ mode: 'spawn', keys: 0, hot_reload: true });

    // The claim writes the credentials line, here in two writes as a stream may cut it (an agent sharing the bootstrap's
    // stdin took the line, or made the pipe non-blocking under the bootstrap's second read).
    bootstrap.stdin!.write(CREDENTIALS.slice(0, 20));
    await new Promise((r) => setTimeout(r, 200));
    bootstrap.stdin!.write(CREDENTIALS.slice(20));
    const watch = await until('the watch', async () => requests.find((r) => r.url === '/api/keys/watch'));
    expect(watch.headers['x-instance-id']).toBe(INSTANCE_ID);
    expect(watch.headers['x-instance-secret']).toBe(INSTANCE_SECRET);
    const second = await until('the keys in the agent', async () => {
      const seen = await agent();
      return seen.keys.OPENAI_API_KEY ? seen : undefined;
    });
    expect(second.keys).toEqual(keys);
    expect(second.pid).toBe(first.pid);
    // The credentials were for the bootstrap: the agent read none of them, nor holds them.
    expect(second.stdin).toBe('');
    expect(second.envValues).not.toContain(INSTANCE_SECRET);
    expect(requests.map((r) => r.url)).toEqual(['/api/keys/watch']);
    expect(closed).toBeUndefined();
    noSecrets(stderr);
  }, 30_000);

  it("exits with the agent's exit code when the agent ends before the credentials arrive", async () => {
    keys = { OPENAI_API_KEY: 'sk-late-never' };
    const port = randomPort();
    startBootstrap(port, LATE, 'pipe');
    await until('the agent', agentAt(port));
    await fetch(`http://127.0.0.1:${port}/exit`);
    expect(await until('the bootstrap to exit', async () => closed)).toBe(7);
    expect(logLines().find((l) => l.msg === 'agent exited')).toMatchObject({ exit_code: 7 });
    expect(logLines().filter((l) => l.level === 'error')).toEqual([]);
    expect(requests).toEqual([]);
  }, 30_000);

  describe('without hot reload, like stdin: the credentials first', () => {
    const PRINT = ['-e', 'console.log(JSON.stringify({ key: process.env.OPENAI_API_KEY ?? null }))'];
    const OFF = { ...LATE, AGENTHOST_RELOAD_URL: '' };

    it('never starts the agent when stdin closes before they arrive', async () => {
      keys = { OPENAI_API_KEY: 'sk-late-off' };
      startBootstrap(randomPort(), OFF, 'pipe', PRINT).stdin!.end();
      expect(await until('the bootstrap to exit', async () => closed)).toBe(1);
      expect(logLines().find((l) => l.level === 'error')).toMatchObject({ msg: 'stdin closed before the credentials arrived' });
      expect(logLines().find((l) => l.msg === 'starting agent')).toBeUndefined();
      expect(stdout).toBe('');
      expect(requests).toEqual([]);
    }, 30_000);

    it('starts the agent with its keys once they have arrived', async () => {
      keys = { OPENAI_API_KEY: 'sk-late-off' };
      const bootstrap = startBootstrap(randomPort(), OFF, 'pipe', PRINT);
      bootstrap.stdin!.write(CREDENTIALS);
      expect(await until('the bootstrap to exit', async () => closed)).toBe(0);
      expect(JSON.parse(stdout)).toEqual({ key: 'sk-late-off' });
      expect(requests.map((r) => r.url)).toEqual(['/api/keys/retrieve']);
      expect(requests[0]!.headers['x-instance-secret']).toBe(INSTANCE_SECRET);
      expect(logLines().find((l) => l.msg === 'starting agent')).toMatchObject({ keys: 1, hot_reload: false });
      noSecrets(stderr);
    }, 30_000);
  });
});

describe('key server', () => {
  it("answers only the agent's token, and marks names it does not hold NOT_FOUND", async () => {
    const { startKeyServer, askKeyServer } = await import('../src/key-server.mjs');
    const server = await startKeyServer({ getKeys: () => ({ A_KEY: 'a-value' }) });
    try {
      expect(await askKeyServer({ socketPath: server.socketPath, token: server.token, ids: ['A_KEY', 'B_KEY'] })).toEqual({
        protocolVersion: 1,
        values: { A_KEY: 'a-value' },
        errors: { B_KEY: { code: 'NOT_FOUND' } },
      });
      await expect(askKeyServer({ socketPath: server.socketPath, token: 'wrong', ids: '*' })).rejects.toThrow(/unauthorized/);
    } finally {
      server.close();
    }
  });
});
