import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  recordSecret,
  signIn,
  startStack,
  type Session,
  type Stack,
  activeSubscriptions,
  cleanupDocker,
  dockerTry,
  gatewayEnv,
  provisionerEnv,
  testNetwork,
  waitFor,
  openclawProcesses,
  startTestLlm,
  useTestLlm,
  type TestLlm,
} from '@agenthost/testkit';

// Key hot reload with the real OpenClaw image: OpenClaw's model provider takes its API key from a SecretRef on
// the platform's exec provider; a test LLM endpoint (OpenAI-compatible, on this machine) records the
// Authorization header of each call. After /keys/update the next call carries the new key, from the same
// OpenClaw process; a reload that fails keeps the old key working and is answered applied: false.
const network = testNetwork('hre');

let stack: Stack;
let owner: Session;
let billing: { stop(): Promise<void> };
let llm: TestLlm;

beforeAll(async () => {
  await cleanupDocker(network);
  const env = provisionerEnv({ network, ports: [18520, 18529] });
  delete env.FRAMEWORK_IMAGES; // the real image: openclaw → agenthost/openclaw
  delete env.TIER_LIMITS_JSON; // and the real tier resources
  // The test LLM endpoint listens on this host: the host firewall would let instances reach only the gateway.
  stack = await startStack({
    services: ['auth', 'keyvault', 'provisioner'],
    serviceEnv: { provisioner: { ...env, READY_TIMEOUT_SECONDS: '150', FIREWALL: 'off' }, gateway: gatewayEnv },
  });
  billing = await activeSubscriptions(stack.nats);
  owner = await signIn(stack.api);
}, 120_000);

afterAll(async () => {
  llm?.stop();
  await billing?.stop();
  await stack?.stop();
  await cleanupDocker(network);
});

const container = (id: string) => `agenthost-${id}`;

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

/** One agent turn through OpenClaw's OpenAI-compatible endpoint; resolves with the Authorization the LLM saw. */
async function chat(port: number, token: string): Promise<string> {
  const before = llm.calls.length;
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openclaw', messages: [{ role: 'user', content: 'ping' }] }),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  expect(llm.calls.length).toBeGreaterThan(before);
  return llm.calls.at(-1)!.authorization;
}

describe('key hot reload in a real OpenClaw instance', () => {
  it('sends the updated key on the next provider call without restarting OpenClaw; a failed reload keeps the old key', async () => {
    llm = await startTestLlm();
    const created = await owner.api.post('/instance/create', { framework: 'openclaw' });
    expect(created.status).toBe(200);
    const { instance_id: id, port, access_token: token } = created.body as { instance_id: string; port: number; access_token: string };
    recordSecret(token);
    await running(id);

    const first = `sk-first-${id}`;
    const second = `sk-second-${id}`;
    recordSecret(first);
    recordSecret(second);
    // (Applied or not, the key is stored: the restart below starts OpenClaw with it.)
    expect((await owner.api.post('/keys/store', { instance_id: id, keys: { OPENAI_API_KEY: first } })).status).toBe(200);

    // The user points a model provider at the platform's secret provider (the config is theirs: written once,
    // then the instance restarted to start with it), at the test LLM on this host.
    await useTestLlm(container(id), llm.port);
    expect((await owner.api.post(`/instance/restart/${id}`)).status).toBe(200);
    await waitFor('the recreated container', async () => (await dockerTry('exec', container(id), 'true')).code === 0 || undefined, 60_000);
    await running(id);

    expect(await chat(port, token)).toBe(`Bearer ${first}`);
    const before = await openclawProcesses(container(id));
    expect(before.length).toBe(2);

    // Update: applied in the running agent; its next call carries the new key, from the same processes.
    const t0 = performance.now();
    const updated = await owner.api.put('/keys/update', { instance_id: id, key_name: 'OPENAI_API_KEY', key_value: second });
    const updateMs = performance.now() - t0;
    expect(updated.body).toEqual({ success: true, instance_id: id, key_name: 'OPENAI_API_KEY', restart_required: false, applied: true });
    expect(await chat(port, token)).toBe(`Bearer ${second}`);
    const after = await openclawProcesses(container(id));
    expect(after.map((p) => [p.pid, p.started])).toEqual(before.map((p) => [p.pid, p.started]));
    // The key is in no OpenClaw process's environment (it lives in OpenClaw's memory, from the bootstrap's).
    for (const p of after) expect(p.env.includes(first) || p.env.includes(second)).toBe(false);

    // A reload that fails (the key the config needs is gone: OpenClaw cannot resolve it) is answered
    // applied: false, and OpenClaw keeps the last good key.
    const deleted = await owner.api.del('/keys/delete', { instance_id: id, key_names: ['OPENAI_API_KEY'] });
    expect(deleted.body).toMatchObject({ success: true, keys_deleted: 1, applied: false });
    expect(deleted.body.reason).toMatch(/could not resolve 1 of its secrets/);
    expect(await chat(port, token)).toBe(`Bearer ${second}`);

    // Nothing of the keys on the instance's disk (volume, tmpfs, root), nor in its logs.
    const grep = await dockerTry('exec', container(id), 'grep', '-rlsF', '-e', first, '-e', second, '/data', '/tmp', '/opt');
    expect(grep.stdout).toBe('');
    const logs = await dockerTry('logs', container(id));
    expect((logs.stdout + logs.stderr).includes(second)).toBe(false);
    expect((await openclawProcesses(container(id))).map((p) => p.pid)).toEqual(before.map((p) => p.pid));
    console.log(`OpenClaw hot reload: /keys/update answered applied in ${updateMs.toFixed(0)} ms`);
    expect((await owner.api.del(`/instance/delete/${id}`)).status).toBe(200);
  }, 420_000);
});
