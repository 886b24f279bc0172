// Runs src/bootstrap.mjs as a real child process against a local keys endpoint.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { seal } from './helpers.ts';

const BOOTSTRAP = fileURLToPath(new URL('../src/bootstrap.mjs', import.meta.url));
const NODE = process.execPath;

const instanceKeyBytes = randomBytes(32);
const INSTANCE_KEY = instanceKeyBytes.toString('base64');
const INSTANCE_ID = '7d0c1c3e-2f1b-4a8e-9d7a-5b6c0e1f2a3b';
const INSTANCE_SECRET = `secret-${randomBytes(16).toString('hex')}`;
const PLAIN = { OPENAI_API_KEY: 'sk-e2e-canary-openai', ANTHROPIC_API_KEY: 'sk-ant-e2e-canary', UNICODE_KEY: 'wert ✓' };

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;
let handler: Handler;
let requests: { url: string; headers: http.IncomingHttpHeaders }[] = [];
let server: http.Server;
let keysUrl: string;

function sealedKeys(): Record<string, string> {
  const keys: Record<string, string> = {};
  for (const [name, value] of Object.entries(PLAIN)) keys[name] = seal(instanceKeyBytes, INSTANCE_ID, name, value);
  // sealed for another instance: must be skipped, not crash the agent
  keys.FOREIGN_KEY = seal(instanceKeyBytes, 'another-instance', 'FOREIGN_KEY', 'foreign-canary');
  keys['not-a-valid-name'] = seal(instanceKeyBytes, INSTANCE_ID, 'not-a-valid-name', 'invalid-name-canary');
  return keys;
}

function json(res: http.ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** The real endpoint's contract: checks the instance headers, then answers the keys. */
const goodHandler: Handler = (req, res) => {
  if (req.url !== '/api/keys/retrieve' || req.method !== 'GET') return json(res, 404, { error: 'not found' });
  if (req.headers['x-instance-id'] !== INSTANCE_ID || req.headers['x-instance-secret'] !== INSTANCE_SECRET) {
    return json(res, 401, { error: 'invalid instance credentials', code: 'UNAUTHORIZED', status: 401 });
  }
  json(res, 200, { keys: sealedKeys() });
};

beforeAll(async () => {
  server = http.createServer((req, res) => {
    requests.push({ url: req.url ?? '', headers: req.headers });
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  keysUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/keys/retrieve`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  requests = [];
  handler = goodHandler;
});

// Prints what the agent received: selected values and whether the credentials leaked.
const PRINT_ENV = `
const e = process.env;
console.log(JSON.stringify({
  OPENAI_API_KEY: e.OPENAI_API_KEY, ANTHROPIC_API_KEY: e.ANTHROPIC_API_KEY, UNICODE_KEY: e.UNICODE_KEY,
  FOREIGN_KEY: e.FOREIGN_KEY ?? null, AGENTHOST_INSTANCE_ID: e.AGENTHOST_INSTANCE_ID, IMAGE_VAR: e.IMAGE_VAR,
  hasSecret: "AGENTHOST_INSTANCE_SECRET" in e, hasKey: "AGENTHOST_INSTANCE_KEY" in e,
  leaked: Object.values(e).some((v) => v === ${JSON.stringify(INSTANCE_SECRET)} || v === ${JSON.stringify(INSTANCE_KEY)}),
}));`;

interface Run {
  child: ChildProcess;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; ms: number }>;
  stdout: () => string;
}

function runBootstrap(mode: string, command: string[], env: Record<string, string> = {}): Run {
  const started = Date.now();
  const child = spawn(NODE, [BOOTSTRAP, ...command], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      AGENTHOST_INSTANCE_ID: INSTANCE_ID,
      AGENTHOST_INSTANCE_SECRET: INSTANCE_SECRET,
      AGENTHOST_INSTANCE_KEY: INSTANCE_KEY,
      AGENTHOST_KEYS_URL: keysUrl,
      AGENTHOST_BOOTSTRAP_MODE: mode,
      IMAGE_VAR: 'from-image',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; ms: number }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, ms: Date.now() - started })),
  );
  return { child, done, stdout: () => stdout };
}

function logLines(stderr: string): { level: string; msg: string; [k: string]: unknown }[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
}

function expectNoSecrets(text: string) {
  for (const s of [INSTANCE_SECRET, INSTANCE_KEY, ...Object.values(PLAIN), 'foreign-canary', 'invalid-name-canary']) {
    expect(text).not.toContain(s);
  }
}

async function waitFor(pred: () => boolean, ms = 5000) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(['exec', 'spawn'])('bootstrap (%s mode)', (mode) => {
  it('starts the agent with the decrypted keys and without the instance credentials', async () => {
    const { code, stdout, stderr } = await runBootstrap(mode, [NODE, '-e', PRINT_ENV]).done;
    expect(code).toBe(0);
    const seen = JSON.parse(stdout.trim());
    expect(seen).toEqual({
      ...PLAIN,
      FOREIGN_KEY: null,
      AGENTHOST_INSTANCE_ID: INSTANCE_ID,
      IMAGE_VAR: 'from-image',
      hasSecret: false,
      hasKey: false,
      leaked: false,
    });
    expect(requests).toHaveLength(1);
    expect(requests[0]!.headers['x-instance-id']).toBe(INSTANCE_ID);
    expect(requests[0]!.headers['x-instance-secret']).toBe(INSTANCE_SECRET);
    const lines = logLines(stderr);
    expect(lines.every((l) => l.instance_id === INSTANCE_ID)).toBe(true);
    const skipped = lines.filter((l) => l.msg === 'skipping key').map((l) => l.key_name);
    expect(skipped.sort()).toEqual(['FOREIGN_KEY', 'not-a-valid-name']);
    expect(lines.find((l) => l.msg === 'starting agent')).toMatchObject({ mode, keys: 3 });
    expectNoSecrets(stderr);
  });

  it('exits 1 quickly on 401 without printing the secret', async () => {
    const { code, stdout, stderr, ms } = await runBootstrap(mode, [NODE, '-e', PRINT_ENV], {
      AGENTHOST_INSTANCE_SECRET: 'wrong-secret-value',
    }).done;
    expect(code).toBe(1);
    expect(ms).toBeLessThan(3000);
    expect(stdout).toBe('');
    expect(requests).toHaveLength(1);
    expect(stderr).toMatch(/rejected the instance credentials \(HTTP 401\)/);
    expect(stderr).not.toContain('wrong-secret-value');
    expectNoSecrets(stderr);
  });

  it('exits 1 at once on 404', async () => {
    handler = (_req, res) => json(res, 404, { error: 'Instance not found' });
    const { code, stderr } = await runBootstrap(mode, [NODE, '-e', PRINT_ENV]).done;
    expect(code).toBe(1);
    expect(requests).toHaveLength(1);
    expect(stderr).toMatch(/404/);
  });

  it('retries 503 twice, then succeeds', async () => {
    let n = 0;
    handler = (req, res) => (++n <= 2 ? json(res, 503, { error: 'unavailable' }) : goodHandler(req, res));
    const { code, stdout, stderr } = await runBootstrap(mode, [NODE, '-e', PRINT_ENV]).done;
    expect(code).toBe(0);
    expect(requests).toHaveLength(3);
    expect(JSON.parse(stdout.trim()).OPENAI_API_KEY).toBe(PLAIN.OPENAI_API_KEY);
    expect(logLines(stderr).filter((l) => l.msg === 'keys fetch failed, retrying')).toHaveLength(2);
    expectNoSecrets(stderr);
  });

  it('gives up after AGENTHOST_BOOTSTRAP_TIMEOUT_MS when the gateway keeps failing', async () => {
    handler = (_req, res) => json(res, 502, {});
    const { code, stdout, stderr, ms } = await runBootstrap(mode, [NODE, '-e', PRINT_ENV], {
      AGENTHOST_BOOTSTRAP_TIMEOUT_MS: '1500',
    }).done;
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(ms).toBeLessThan(4000);
    expect(requests.length).toBeGreaterThanOrEqual(2);
    expect(stderr).toMatch(/could not fetch keys within 1500 ms/);
  });

  it('retries when the gateway is unreachable, then gives up', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const { code, stderr } = await runBootstrap(mode, [NODE, '-e', PRINT_ENV], {
      AGENTHOST_KEYS_URL: `http://127.0.0.1:${port}/api/keys/retrieve`,
      AGENTHOST_BOOTSTRAP_TIMEOUT_MS: '1000',
    }).done;
    expect(code).toBe(1);
    expect(stderr).toMatch(/network error \(ECONNREFUSED\)/);
  });

  it('forwards SIGTERM to the agent and exits with its exit code', async () => {
    const script = `process.on("SIGTERM", () => { console.log("got SIGTERM"); process.exit(42); });
      console.log("agent up"); setInterval(() => {}, 1000);`;
    const run = runBootstrap(mode, [NODE, '-e', script]);
    await waitFor(() => run.stdout().includes('agent up'));
    run.child.kill('SIGTERM');
    const { code, stdout } = await run.done;
    expect(stdout).toContain('got SIGTERM');
    expect(code).toBe(42);
  });

  it("exits with the agent's exit code", async () => {
    const { code } = await runBootstrap(mode, [NODE, '-e', 'process.exit(7)']).done;
    expect(code).toBe(7);
  });

  it('ends promptly on SIGTERM while still fetching keys', async () => {
    handler = () => {}; // never answers
    const run = runBootstrap(mode, [NODE, '-e', PRINT_ENV]);
    await waitFor(() => requests.length > 0);
    run.child.kill('SIGTERM');
    const { code, stdout } = await run.done;
    expect(code).toBe(143);
    expect(stdout).toBe('');
  });

  it('exits 127 when the agent command does not exist', async () => {
    const { code, stderr } = await runBootstrap(mode, ['no-such-agent-command-xyz']).done;
    expect(code).toBe(127);
    expect(stderr).toMatch(/agent command not found/);
  });
});

describe('bootstrap configuration', () => {
  it('spawn mode reports an agent killed by a signal as 128+n', async () => {
    const { code } = await runBootstrap('spawn', [NODE, '-e', `process.kill(process.pid, "SIGKILL")`]).done;
    expect(code).toBe(137);
  });

  it('fails clearly when required variables are missing', async () => {
    const { code, stderr } = await runBootstrap('exec', [NODE, '-e', PRINT_ENV], {
      AGENTHOST_KEYS_URL: '',
      AGENTHOST_INSTANCE_KEY: '',
    }).done;
    expect(code).toBe(1);
    const err = logLines(stderr).find((l) => l.level === 'error');
    expect(err).toMatchObject({ msg: 'missing required environment variables' });
    expect(err!.missing).toEqual(['AGENTHOST_KEYS_URL', 'AGENTHOST_INSTANCE_KEY']);
    expect(requests).toHaveLength(0);
  });

  it('rejects an instance key that is not 32 bytes before calling the gateway', async () => {
    const { code, stderr } = await runBootstrap('exec', [NODE, '-e', PRINT_ENV], {
      AGENTHOST_INSTANCE_KEY: randomBytes(16).toString('base64'),
    }).done;
    expect(code).toBe(1);
    expect(stderr).toMatch(/AGENTHOST_INSTANCE_KEY is unusable/);
    expect(requests).toHaveLength(0);
  });

  it('AGENTHOST_BOOTSTRAP_SKIP_KEYS=1 starts the agent without fetching', async () => {
    const { code, stdout } = await runBootstrap('exec', [NODE, '-e', PRINT_ENV], {
      AGENTHOST_BOOTSTRAP_SKIP_KEYS: '1',
      AGENTHOST_KEYS_URL: '',
    }).done;
    expect(code).toBe(0);
    expect(requests).toHaveLength(0);
    const seen = JSON.parse(stdout.trim());
    expect(seen.OPENAI_API_KEY).toBeUndefined();
    expect(seen.hasSecret).toBe(false);
    expect(seen.hasKey).toBe(false);
  });

  it('exits 2 without an agent command', async () => {
    const { code, stderr } = await runBootstrap('exec', []).done;
    expect(code).toBe(2);
    expect(stderr).toMatch(/no agent command/);
  });
});
