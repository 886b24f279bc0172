import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  recordSecret,
  signIn,
  subscribe,
  waitFor,
  type Edge,
  type Session,
  type Stack,
  cleanupDocker,
  docker,
  dockerTry,
  testNetwork,
  openclawProcesses,
  startTestLlm,
  useTestLlm,
  type TestLlm,
} from '@agenthost/testkit';
import { realOpenclaw, sleepStack, statusOf, untilRunning } from './sleep-stack.ts';

// A light sleep with the real OpenClaw image, through the real edge: the agent is frozen (its memory pushed out to
// swap where the host's swap allows) and a request resumes the same OpenClaw processes. Its conversation state
// (the processes' memory and the volume) is kept, a key stored while it slept is the one its next model call
// carries, and the Control UI's WebSocket reaches it again. The model provider is a stub on this host.
// Ports of this suite: instances 18650-18654, the edge 18656 (HTTPS) and 18657 (HTTP).
// Long enough for a few steps after a request; its boot may take longer than this (it then sleeps at once, and the
// next request wakes it), so each step that reaches into the container comes right after a request.
const IDLE = 30;
const network = testNetwork('sleep-oc');

let stack: Stack;
let edge: Edge;
let owner: Session;
let llm: TestLlm;

beforeAll(async () => {
  await cleanupDocker(network);
  llm = await startTestLlm();
  ({ stack, edge } = await sleepStack({
    network,
    ports: [18650, 18654],
    edgePorts: { https: 18656, http: 18657 },
    idle: { pro: IDLE },
    provisioner: {
      ...realOpenclaw,
    },
    edge: { EDGE_WAKE_TIMEOUT_SECONDS: '120' },
  }));
  owner = await signIn(stack.api);
  await subscribe(stack, owner, { tier: 'pro' });
}, 240_000);

afterAll(async () => {
  llm?.stop();
  await edge?.stop();
  await stack?.stop();
  await cleanupDocker(network);
});

const container = (id: string) => `agenthost-${id}`;

/** The owner's request through the edge: it wakes the instance if it sleeps, and counts as its traffic. */
async function touch(url: string, token: string): Promise<void> {
  expect((await edge.request(`${url}/`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
}

/** One agent turn through the edge and OpenClaw's OpenAI-compatible endpoint; the Authorization its model call carried. */
async function turn(url: string, token: string, text: string): Promise<string> {
  const before = llm.calls.length;
  const r = await edge.request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openclaw', messages: [{ role: 'user', content: text }] }),
    // An agent's first turn after its boot loads its plugin catalog first.
    timeoutMs: 120_000,
  });
  expect(r.status, r.text).toBe(200);
  expect(llm.calls.length).toBeGreaterThan(before);
  return llm.calls.at(-1)!.authorization;
}

describe('a light sleep of a real OpenClaw agent', () => {
  it('resumes the same agent: its memory and volume, a key stored while it slept, and the Control UI’s WebSocket', async () => {
    const created = await owner.api.post('/instance/create', { framework: 'openclaw' });
    expect(created.status, created.text).toBe(200);
    const { instance_id: id, url, access_token: token } = created.body as { instance_id: string; url: string; access_token: string };
    recordSecret(token);
    await untilRunning(owner, id);
    const first = `sk-first-${randomBytes(8).toString('hex')}`;
    const second = `sk-second-${randomBytes(8).toString('hex')}`;
    recordSecret(first);
    recordSecret(second);
    expect((await owner.api.post('/keys/store', { instance_id: id, keys: { OPENAI_API_KEY: first } })).status).toBe(200);
    await touch(url, token);
    await useTestLlm(container(id), llm.port);
    expect((await owner.api.post(`/instance/restart/${id}`)).status).toBe(200);
    await untilRunning(owner, id);

    expect(await turn(url, token, 'remember the word heron')).toBe(`Bearer ${first}`);
    expect((await statusOf(owner, id)).status).toBe('running');
    const before = await openclawProcesses(container(id));
    expect(before.length).toBe(2);
    await docker('exec', container(id), 'sh', '-c', 'echo kept > /data/home/sleep-marker');

    await waitFor('asleep', async () => (await statusOf(owner, id)).status === 'sleeping' || undefined, 120_000, 250);
    expect(['frozen', 'swapped']).toContain((await statusOf(owner, id)).sleep_depth);
    // Its status says so first (the edges hear it), then its container is frozen.
    await waitFor('frozen', async () => (await docker('inspect', '-f', '{{.State.Paused}}', container(id))).trim() === 'true' || undefined, 30_000, 250);
    const stored = await owner.api.put('/keys/update', { instance_id: id, key_name: 'OPENAI_API_KEY', key_value: second });
    expect(stored.body).toMatchObject({ applied: false, reason: 'the instance is asleep: it loads its keys when it wakes' });

    // The first request wakes it and is answered by OpenClaw; its bootstrap's key watch hands it the change it held.
    const page = await edge.request(`${url}/`, { headers: { authorization: `Bearer ${token}` } });
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/<html/i);
    expect((await statusOf(owner, id)).status).toBe('running');
    await waitFor('the stored key in use', async () => (await turn(url, token, 'which word?')) === `Bearer ${second}` || undefined, 30_000, 1000);

    // The same processes, started at the same moment: everything they held in memory is as it was.
    const after = await openclawProcesses(container(id));
    expect(after.map((p) => [p.pid, p.started])).toEqual(before.map((p) => [p.pid, p.started]));
    expect((await docker('exec', container(id), 'cat', '/data/home/sleep-marker')).trim()).toBe('kept');
    // The Control UI's WebSocket: OpenClaw opens with its connect challenge.
    const ws = await edge.websocket(`${url}/`, { authorization: `Bearer ${token}` });
    expect(JSON.parse(await ws.receive())).toMatchObject({ type: 'event', event: 'connect.challenge' });
    ws.close();
    // Nothing of either key on the instance's disk.
    const grep = await dockerTry('exec', container(id), 'grep', '-rlsF', '-e', first, '-e', second, '/data', '/tmp');
    expect(grep.stdout).toBe('');
    expect((await owner.api.del(`/instance/delete/${id}`)).status).toBe(200);
  }, 480_000);
});
