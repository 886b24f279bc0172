// Key hot reload, bootstrap side: src/bootstrap.mjs as a real process against a local gateway (retrieve, watch,
// applied) and a small agent that resolves its keys through keys-resolver.mjs, as OpenClaw's exec provider does.
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

let keys: Record<string, string> = {};
const watches = new Set<http.ServerResponse>();
const reports: { change_id: string; applied: boolean; reason?: string }[] = [];
let gateway: http.Server;
let base: string;

const sealed = () => Object.fromEntries(Object.entries(keys).map(([n, v]) => [n, seal(instanceKeyBytes, INSTANCE_ID, n, v)]));
const push = (changeId: string | null) => {
  for (const w of watches) w.write(`event: keys\ndata: ${JSON.stringify({ keys: sealed(), change_id: changeId })}\n\n`);
};

beforeAll(async () => {
  gateway = http.createServer((req, res) => {
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

// The agent: resolves its keys at start and on POST /reload (failing on purpose while FAIL is set), shows them on GET.
const AGENT = `
const http = require("node:http"); const { execFileSync } = require("node:child_process");
let keys = {}; let fail = false;
const resolve = () => { keys = JSON.parse(execFileSync(${JSON.stringify(NODE)}, [${JSON.stringify(RESOLVER)}, "--all"], { env: { AGENTHOST_KEYS_SOCKET: process.env.AGENTHOST_KEYS_SOCKET, AGENTHOST_KEYS_TOKEN: process.env.AGENTHOST_KEYS_TOKEN } })).values; };
resolve();
http.createServer((req, res) => {
  if (req.url === "/fail") { fail = true; return res.end("{}"); }
  if (req.url === "/reload") { if (fail) { res.statusCode = 500; return res.end(JSON.stringify({ ok: false, reason: "failing on purpose" })); } resolve(); return res.end(JSON.stringify({ ok: true })); }
  res.end(JSON.stringify({ keys, pid: process.pid, envValues: Object.values(process.env) }));
}).listen(Number(process.env.AGENT_PORT), "127.0.0.1");`;

let child: ChildProcess | undefined;
afterEach(() => {
  child?.kill('SIGTERM');
  child = undefined;
});

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
    const port = 20000 + Math.floor(Math.random() * 20000);
    let stderr = '';
    child = spawn(NODE, [BOOTSTRAP, NODE, '-e', AGENT], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        AGENTHOST_INSTANCE_ID: INSTANCE_ID,
        AGENTHOST_INSTANCE_SECRET: INSTANCE_SECRET,
        AGENTHOST_INSTANCE_KEY: instanceKeyBytes.toString('base64'),
        AGENTHOST_KEYS_URL: `${base}/retrieve`,
        AGENTHOST_KEYS_WATCH: '1',
        AGENTHOST_RELOAD_URL: `http://127.0.0.1:${port}/reload`,
        AGENT_PORT: String(port),
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.on('data', (d) => (stderr += d));
    const agent = async () => (await (await fetch(`http://127.0.0.1:${port}/`)).json()) as { keys: Record<string, string>; pid: number; envValues: string[] };
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
