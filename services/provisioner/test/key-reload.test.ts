import { createHash } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts, listen } from '@agenthost/shared';
import {
  apiClient,
  recordSecret,
  signIn,
  startStack,
  type ApiClient,
  type Session,
  type Stack,
  activeSubscriptions,
  cleanupDocker,
  gatewayEnv,
  provisionerEnv,
  standinVariant,
  testNetwork,
  waitFor,
} from '@agenthost/testkit';

// Key hot reload through the whole system with the stand-in agent (fast): the API changes keys, the instance's
// bootstrap hears it on its watch, the agent resolves them again through the bootstrap's key server, and the API
// answer says it did. The real OpenClaw image has its own test (key-reload.e2e.test.ts).
const network = testNetwork('hr');
const VARIANT = 't-hotreload';

let stack: Stack;
let owner: Session;
let billing: { stop(): Promise<void> };
let nc: NatsConnection;
/** The owner on the second gateway replica: the instance's watch is on the first. */
let other: ApiClient;

beforeAll(async () => {
  await cleanupDocker(network);
  // The stand-in reloads on POST /reload; the image says so, as the OpenClaw image names its secrets.reload.
  await standinVariant(VARIANT, { AGENTHOST_RELOAD_URL: 'http://127.0.0.1:18789/reload' });
  stack = await startStack({
    services: ['auth', 'keyvault', 'provisioner'],
    gateways: 2,
    serviceEnv: { provisioner: provisionerEnv({ network, ports: [18510, 18519], extra: { DEFAULT_VERSION: VARIANT } }), gateway: gatewayEnv },
  });
  billing = await activeSubscriptions(stack.nats);
  nc = await stack.nats.connect();
  owner = await signIn(stack.api);
  other = apiClient(`${String(stack.gateways[1]!.ready.url)}/api`, owner.token);
}, 120_000);

afterAll(async () => {
  await nc?.drain();
  await billing?.stop();
  await stack?.stop();
  await cleanupDocker(network);
});

const sha = (v: string) => createHash('sha256').update(v).digest('hex');
const agent = async (port: number, path: string) => (await (await fetch(`http://127.0.0.1:${port}${path}`)).json()) as Record<string, unknown>;

async function running(id: string): Promise<void> {
  await waitFor(
    'instance running',
    async () => {
      const r = await owner.api.get(`/instance/status/${id}`);
      if (r.body.status === 'failed') throw new Error(`failed: ${r.body.failure_reason}`);
      return r.body.status === 'running' ? true : undefined;
    },
    60_000,
  );
}

describe('key hot reload (stand-in agent)', () => {
  it('stores, updates and deletes keys in a running instance without restarting it, and says so in the answer and an event', async () => {
    const created = await owner.api.post('/instance/create', { framework: 'openclaw' });
    expect(created.status).toBe(200);
    const { instance_id: id, port } = created.body as { instance_id: string; port: number };
    await running(id);
    // The bootstrap opens its watch as it starts the agent; a change before that is loaded when the watch opens.
    await waitFor(
      'the key watch',
      async () => ((await owner.api.get(`/instance/logs/${id}?tail=100`)).body.lines as string[]).join('\n').includes('key watch open') || undefined,
      10_000,
    ).catch(async (e) => {
      console.log((await owner.api.get(`/instance/logs/${id}?tail=100`)).body.lines.join('\n'));
      throw e;
    });
    const before = await agent(port, '/');
    const events: Array<{ action: string; applied: boolean; key_names: string[] }> = [];
    const sub = listen(
      nc,
      contracts.keys.keysChanged,
      (ev) => {
        if (ev.instance_id === id) events.push(ev);
      },
      undefined,
    );

    const first = `sk-hot-${id}-first`;
    const second = `sk-hot-${id}-second`;
    recordSecret(first);
    recordSecret(second);
    let t = performance.now();
    const stored = await owner.api.post('/keys/store', { instance_id: id, keys: { OPENAI_API_KEY: first } });
    const storeMs = performance.now() - t;
    expect(stored.body).toEqual({ success: true, keys_stored: 1, instance_id: id, applied: true });
    expect(await agent(port, '/keys')).toMatchObject({ names: ['OPENAI_API_KEY'], sha256: { OPENAI_API_KEY: sha(first) } });

    // Through the other replica: it reaches the watch over NATS, and the result comes back the same way.
    t = performance.now();
    const updated = await other.put('/keys/update', { instance_id: id, key_name: 'OPENAI_API_KEY', key_value: second });
    const updateMs = performance.now() - t;
    expect(updated.body).toEqual({ success: true, instance_id: id, key_name: 'OPENAI_API_KEY', restart_required: false, applied: true });
    expect((await agent(port, '/keys')).sha256).toEqual({ OPENAI_API_KEY: sha(second) });

    const deleted = await owner.api.del('/keys/delete', { instance_id: id, key_names: ['OPENAI_API_KEY'] });
    expect(deleted.body).toEqual({ success: true, instance_id: id, keys_deleted: 1, applied: true });
    expect((await agent(port, '/keys')).names).toEqual([]);

    // The same process all along, and the keys never in its environment.
    const after = await agent(port, '/');
    expect(after.pid).toBe(before.pid);
    expect(after.uptime_ms as number).toBeGreaterThan(before.uptime_ms as number);
    const env = (await agent(port, '/env')) as { sha256: Record<string, string> };
    expect(Object.values(env.sha256)).not.toContain(sha(first));
    expect(Object.values(env.sha256)).not.toContain(sha(second));

    await waitFor('three events', async () => (events.length === 3 ? true : undefined), 5000);
    expect(events.map((e) => [e.action, e.applied, e.key_names])).toEqual([
      ['stored', true, ['OPENAI_API_KEY']],
      ['updated', true, ['OPENAI_API_KEY']],
      ['deleted', true, ['OPENAI_API_KEY']],
    ]);
    sub.unsubscribe();
    console.log(`hot reload through the API: store ${storeMs.toFixed(0)} ms, update ${updateMs.toFixed(0)} ms`);

    // A stopped instance cannot take the change: answered at once, and it loads the keys at its next start.
    expect((await owner.api.post(`/instance/stop/${id}`)).status).toBe(200);
    t = performance.now();
    const whileStopped = await owner.api.post('/keys/store', { instance_id: id, keys: { OPENAI_API_KEY: first } });
    expect(whileStopped.body).toMatchObject({ applied: false, reason: 'instance not running' });
    expect(performance.now() - t).toBeLessThan(2000);
    expect((await owner.api.post(`/instance/start/${id}`)).status).toBe(200);
    await running(id);
    await waitFor('keys loaded at start', async () => ((await agent(port, '/keys')).names as string[]).includes('OPENAI_API_KEY') || undefined, 10_000);
    expect((await owner.api.del(`/instance/delete/${id}`)).status).toBe(200);
  }, 120_000);
});
