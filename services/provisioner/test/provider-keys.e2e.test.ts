import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  recordSecret,
  signIn,
  startStack,
  type Session,
  type Stack,
  activeSubscriptions,
  cleanupDocker,
  docker,
  dockerTry,
  gatewayEnv,
  provisionerEnv,
  testNetwork,
  waitFor,
} from '@agenthost/testkit';

// Standard provider keys with the real OpenClaw image: a user stores OPENAI_API_KEY and OpenClaw's built-in OpenAI
// provider uses it, with no SecretRef written by the user. The user's config only points the provider at a stub
// endpoint on this host (a Chat Completions API that records the Authorization header it receives); the key itself
// is wired by the platform, at once for a running agent and again at every start, and unwired when deleted. A key
// the user's config sets for the provider stays theirs.
const network = testNetwork('pkeys');

let stack: Stack;
let owner: Session;
let billing: { stop(): Promise<void> };
let stub: http.Server;
const seen: string[] = [];

/** Just enough of the Chat Completions API for one agent turn (streamed or not). */
function startStub(): Promise<number> {
  stub = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (!req.url?.endsWith('/chat/completions')) return res.writeHead(404).end('{}');
      seen.push(req.headers.authorization ?? '');
      const base = { id: 'chatcmpl-test', created: Math.floor(Date.now() / 1000), model: 'm1' };
      const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
      const message = { role: 'assistant', content: 'pong' };
      if (!/"stream":\s*true/.test(body)) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: 'stop' }], usage }));
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: message, finish_reason: null }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  return new Promise((resolve) => stub.listen(0, '0.0.0.0', () => resolve((stub.address() as AddressInfo).port)));
}

beforeAll(async () => {
  await cleanupDocker(network);
  const env = provisionerEnv({ network, ports: [18530, 18534] });
  delete env.FRAMEWORK_IMAGES; // the real image: openclaw → agenthost/openclaw
  delete env.TIER_LIMITS_JSON; // and the real tier resources
  // The stub listens on this host: the host firewall would let instances reach only the gateway.
  stack = await startStack({
    services: ['auth', 'keyvault', 'provisioner'],
    serviceEnv: { provisioner: { ...env, READY_TIMEOUT_SECONDS: '150', FIREWALL: 'off' }, gateway: gatewayEnv },
  });
  billing = await activeSubscriptions(stack.nats);
  owner = await signIn(stack.api);
}, 120_000);

afterAll(async () => {
  stub?.closeAllConnections();
  stub?.close();
  await billing?.stop();
  await stack?.stop();
  await cleanupDocker(network);
});

const container = (id: string) => `agenthost-${id}`;
const CONFIG = '/data/home/.openclaw/openclaw.json';

async function running(id: string): Promise<void> {
  await waitFor(
    'instance running',
    async () => {
      const r = await owner.api.get(`/instance/status/${id}`);
      if (r.body.status === 'failed') throw new Error(`failed: ${r.body.failure_reason}`);
      return r.body.status === 'running' ? true : undefined;
    },
    150_000,
    500,
  ).catch(async (err) => {
    const logs = await dockerTry('logs', '--tail', '80', container(id));
    console.log(logs.stdout, logs.stderr);
    throw err;
  });
}

async function restart(id: string): Promise<void> {
  expect((await owner.api.post(`/instance/restart/${id}`)).status).toBe(200);
  await waitFor('the recreated container', async () => (await dockerTry('exec', container(id), 'true')).code === 0 || undefined, 60_000);
  await running(id);
}

/** What went wrong, for a failed step: the answer and the container's log (which never holds a key). */
async function showLogs(id: string, body: unknown): Promise<void> {
  const logs = await dockerTry('logs', '--tail', '60', container(id));
  console.log(JSON.stringify(body), logs.stdout, logs.stderr);
}

/** The user's edit of their own config, as they would make it: a node one-liner over the file. */
async function editConfig(id: string, edit: string): Promise<void> {
  await docker(
    'exec',
    container(id),
    'node',
    '-e',
    `const fs=require("fs");const c=JSON.parse(fs.readFileSync("${CONFIG}","utf8"));${edit};fs.writeFileSync("${CONFIG}",JSON.stringify(c,null,2))`,
  );
}

const openaiKeySetting = async (id: string): Promise<unknown> =>
  JSON.parse(await docker('exec', container(id), 'cat', CONFIG)).models?.providers?.openai?.apiKey;

/** One agent turn through OpenClaw's Chat Completions endpoint; resolves with the Authorization the stub saw. */
async function chat(port: number, token: string): Promise<string | undefined> {
  const before = seen.length;
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openclaw', messages: [{ role: 'user', content: 'ping' }] }),
    signal: AbortSignal.timeout(60_000),
  });
  await res.text();
  return seen.length > before ? seen[seen.length - 1] : undefined;
}

/** OpenClaw's own view of the OpenAI provider's credential, run in the container as the agent's user. */
async function modelsStatus(id: string): Promise<string> {
  const r = await dockerTry('exec', '-u', '10001:10001', container(id), 'openclaw', 'models', 'status', '--json');
  return r.stdout + r.stderr;
}

describe("standard provider keys in a real OpenClaw instance (OpenClaw's built-in OpenAI provider)", () => {
  it('uses a stored OPENAI_API_KEY with no config edit, at once and after a restart; unwires it when deleted; keeps the key a user sets', async () => {
    const stubPort = await startStub();
    const created = await owner.api.post('/instance/create', { framework: 'openclaw' });
    expect(created.status).toBe(200);
    const { instance_id: id, port, access_token: token } = created.body as { instance_id: string; port: number; access_token: string };
    recordSecret(token);
    await running(id);

    // The user's settings, none about the key: OpenAI's base URL at the stub on this host, its model, the
    // Chat Completions endpoint to drive a turn.
    const keysUrl = JSON.parse(await docker('inspect', '--format', '{{json .Config.Env}}', container(id))).find((e: string) =>
      e.startsWith('AGENTHOST_KEYS_URL='),
    );
    const hostAddr = new URL(keysUrl.slice('AGENTHOST_KEYS_URL='.length)).hostname;
    const openai = {
      baseUrl: `http://${hostAddr}:${stubPort}/v1`,
      api: 'openai-completions',
      models: [
        {
          id: 'm1',
          name: 'M1',
          reasoning: false,
          input: ['text'],
          cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
          contextWindow: 32000,
          maxTokens: 1000,
        },
      ],
    };
    await editConfig(
      id,
      `c.gateway.http={endpoints:{chatCompletions:{enabled:true}}};c.agents={defaults:{model:{primary:"openai/m1"}}};c.models={providers:{openai:${JSON.stringify(openai)}}}`,
    );
    await restart(id);

    const first = `sk-proj-first-${id}`;
    const own = `sk-own-${id}`;
    recordSecret(first);
    recordSecret(own);

    // Stored while the agent runs: wired and applied without a restart.
    const stored = await owner.api.post('/keys/store', { instance_id: id, keys: { OPENAI_API_KEY: first } });
    if (stored.body.applied !== true) await showLogs(id, stored.body);
    expect(stored.body).toMatchObject({ success: true, applied: true });
    expect(await openaiKeySetting(id)).toEqual({ source: 'exec', provider: 'agenthost', id: 'OPENAI_API_KEY' });
    expect(await chat(port, token)).toBe(`Bearer ${first}`);
    // OpenClaw's own view: the OpenAI provider has a credential, a SecretRef it manages (never the key itself).
    const status = await modelsStatus(id);
    expect(status).not.toContain(first);
    const auth = JSON.parse(status.slice(status.indexOf('{'))).auth as {
      missingProvidersInUse: string[];
      providers: { provider: string; effective: { kind: string; detail: string } }[];
    };
    expect(auth.missingProvidersInUse).not.toContain('openai');
    expect(auth.providers.find((p) => p.provider === 'openai')?.effective.detail).toContain('secretref-managed');

    // At the next start the launcher wires it again (the config on the volume is the user's; it still holds only the ref).
    await restart(id);
    expect(await chat(port, token)).toBe(`Bearer ${first}`);

    // Deleted: unwired, so OpenClaw holds no stale reference and sends the old key nowhere.
    const deleted = await owner.api.del('/keys/delete', { instance_id: id, key_names: ['OPENAI_API_KEY'] });
    expect(deleted.body).toMatchObject({ success: true, keys_deleted: 1, applied: true });
    expect(await openaiKeySetting(id)).toBeUndefined();
    expect(await chat(port, token)).not.toBe(`Bearer ${first}`);

    // The user's config sets the provider's key itself (a key of their own name): theirs wins, over our wiring, at a
    // change and at a start.
    const second = `sk-proj-second-${id}`;
    recordSecret(second);
    const both = await owner.api.post('/keys/store', { instance_id: id, keys: { MY_OPENAI: own, OPENAI_API_KEY: first } });
    expect(both.body).toMatchObject({ success: true, applied: true });
    expect(await openaiKeySetting(id)).toEqual({ source: 'exec', provider: 'agenthost', id: 'OPENAI_API_KEY' });
    await editConfig(id, `c.models.providers.openai.apiKey={source:"exec",provider:"agenthost",id:"MY_OPENAI"}`);
    await waitFor("the user's key in use", async () => ((await chat(port, token)) === `Bearer ${own}` ? true : undefined), 60_000, 1000);
    const changed = await owner.api.post('/keys/store', { instance_id: id, keys: { OPENAI_API_KEY: second } });
    expect(changed.body).toMatchObject({ success: true, applied: true });
    expect(await openaiKeySetting(id)).toEqual({ source: 'exec', provider: 'agenthost', id: 'MY_OPENAI' });
    expect(await chat(port, token)).toBe(`Bearer ${own}`);
    await restart(id);
    expect(await openaiKeySetting(id)).toEqual({ source: 'exec', provider: 'agenthost', id: 'MY_OPENAI' });
    expect(await chat(port, token)).toBe(`Bearer ${own}`);

    // Never the key on the instance's disk (volume, tmpfs, root) or in its logs.
    const grep = await dockerTry('exec', container(id), 'grep', '-rlsF', '-e', first, '-e', second, '-e', own, '/data', '/tmp', '/opt');
    expect(grep.stdout).toBe('');
    const logs = await dockerTry('logs', container(id));
    expect([first, second, own].some((k) => (logs.stdout + logs.stderr).includes(k))).toBe(false);
    expect((await owner.api.del(`/instance/delete/${id}`)).status).toBe(200);
  }, 600_000);
});
