import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, recordSecret, signIn, subscribe, waitFor } from '../../../packages/testkit/src/index.ts';
import {
  apiUrl,
  deployStack,
  expectSpread,
  leftovers,
  manager,
  MANAGER,
  nodeCommand,
  twoNode,
  removeStrayInstances,
  runningTasks,
  saveServiceLogs,
  scale,
  SCALED,
  statusIs,
  swarmChain,
  worker,
  WORKER,
} from './helpers.ts';
import { chaosUnderLoad } from './chaos.ts';
import { doctorSeesDrift } from './doctor.ts';
import { expectIsolated } from './isolation.ts';
import { agentReaches, agentVia, DOMAIN, EDGE_HTTP_PORT, edgeOrigin, nodeOf, nodeReach, plainVia, viaEdge } from './edge.ts';

// The stack on a two-node swarm (the second engine in its own network namespace), used as a wallet holder and a
// developer would: every call goes through a node's edge to the gateways. The deployment's secret material is kept
// where deploy keeps it: a second run updates the same stack (a new CA and new identities at once would not roll).
const state = process.env.AGENTHOST_STATE ?? '/var/lib/agenthost';

beforeAll(async () => {
  await removeStrayInstances();
  await deployStack(
    state,
    Object.entries(SCALED).map(([s, n]) => `${s}=${n}`),
  );
}, 1_200_000);

// The platform goes with the suite, once its logs are kept: ~15 tasks on two engines (crash-looping, if a scenario
// left it broken) would otherwise share the 2 cores with every suite that runs after this one.
afterAll(async () => {
  await saveServiceLogs();
  await twoNode('down');
}, 420_000);

describe('agenthost on a two-node swarm', () => {
  it('runs gateway ×2, auth ×2, billing-chain ×1, provisioner ×2, keyvault ×2 and NATS ×3, across both nodes, every image started without a pull', async () => {
    const nodes = new Set<string>();
    for (const [svc, n] of Object.entries(SCALED)) {
      const tasks = await runningTasks(`agenthost-${svc}`);
      expect(tasks, svc).toHaveLength(n);
      for (const t of tasks) nodes.add(t.node);
    }
    for (const i of [1, 2, 3]) expect(await runningTasks(`agenthost-nats-${i}`)).toHaveLength(1);
    expect(nodes.size).toBe(2);
    // Each part runs by image id: no task waited on a registry (a pull attempt names the image by tag).
    for (const s of await manager.listServices({ filters: JSON.stringify({ label: ['agenthost.stack=agenthost'] }) }))
      expect((s.Spec?.TaskTemplate as { ContainerSpec?: { Image?: string } } | undefined)?.ContainerSpec?.Image, s.Spec?.Name).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect((await apiClient(apiUrl(WORKER)).get('/health/ready')).status).toBe(200);
  });

  it('gives each task only its own settings and secrets (no edge the CA root key); outsiders reach only the HTTPS edge', () => expectIsolated(), 600_000);

  it('signs in, subscribes, creates instances up to the tier limit on both nodes, gives an agent its keys, and deletes without leftovers', async () => {
    const session = await signIn(apiClient(apiUrl()));
    await subscribe({ chain: swarmChain }, session, { tier: 'pro' });
    const api = session.api;

    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await api.post('/instance/create', { framework: 'openclaw', name: `swarm-${i}` });
      expect(r.status, r.text).toBe(200);
      recordSecret(r.body.access_token);
      ids.push(r.body.instance_id);
    }
    try {
      const over = await api.post('/instance/create', { framework: 'openclaw' });
      expect(over.status).toBe(403);
      expect(over.body.code).toBe('INSTANCE_LIMIT_EXCEEDED');

      const views = await Promise.all(
        ids.map((id) =>
          waitFor(
            `instance ${id} running`,
            async () => {
              const r = await api.get(`/instance/status/${id}`);
              if (r.body.status === 'failed') throw new Error(`instance failed: ${r.text}`);
              return r.body.status === 'running' ? r.body : undefined;
            },
            180_000,
            500,
          ),
        ),
      );
      const nodes = await Promise.all(views.map((v) => nodeOf(v.instance_id)));
      expect(new Set(nodes)).toEqual(new Set([MANAGER, WORKER]));
      // Two instances on one node share its instance bridge, and neither reaches the other (each reaches itself there).
      const node = nodes.find((n, i) => nodes.indexOf(n) !== i)!;
      const [a, b] = ids.filter((_, i) => nodes[i] === node) as [string, string];
      expect(await agentReaches(node, a, a)).toBe(true);
      expect(await agentReaches(node, a, b)).toBe(false);
      // Each node's firewall (node-setup.ts): of its node an instance reaches only the edge's instance port; no other node.
      expect(await nodeReach(ids[nodes.indexOf(WORKER)]!, ids[nodes.indexOf(MANAGER)]!)).toEqual([true, false, false, false]);
      // Live CPU and memory wherever an instance runs (its node's edge reads them from that node's cgroups).
      for (const live of await Promise.all([MANAGER, WORKER].map(async (n) => (await api.get(`/instance/status/${ids[nodes.indexOf(n)]}`)).body)))
        expect([live.memory_usage_mb > 0, live.cpu_usage_percent >= 0], JSON.stringify(live)).toEqual([true, true]);

      // The HTTPS edge on every node: one URL per instance, the same through either node's edge wherever the instance
      // runs, under the deployment's one CA; the API there too, without the routes only instances call.
      for (const node of [MANAGER, WORKER]) {
        for (const v of views) {
          expect(v.url).toBe(`https://${v.instance_id}.${DOMAIN}:18443`);
          expect((await agentVia(v.url, '/', node)).state.boots).toBeGreaterThan(0);
        }
        const status = await viaEdge(`${edgeOrigin}/api/subscription/status`, { node, headers: { authorization: `Bearer ${session.token}` } });
        expect(status.status, status.text).toBe(200);
        expect(status.headers['strict-transport-security']).toBeDefined();
        const retrieve = await viaEdge(`${edgeOrigin}/api/keys/retrieve`, { node });
        expect(retrieve.json).toMatchObject({ code: 'NOT_FOUND', status: 404 });
        const unknown = await viaEdge(`https://inst-00000000000000000000.${DOMAIN}:18443/`, { node });
        expect(unknown.json).toMatchObject({ code: 'INSTANCE_NOT_FOUND', status: 404 });
        expect(await plainVia(`http://${DOMAIN}:${EDGE_HTTP_PORT}/api/auth/me`, node)).toEqual([308, `${edgeOrigin}/api/auth/me`]);
      }

      // A key stored through the API reaches the agent on the worker node when it restarts: the agent's
      // bootstrap fetched it through that node's edge and the gateways, from keyvault.
      const onWorker = views[nodes.indexOf(WORKER)]!;
      const value = `sk-swarm-${randomBytes(16).toString('hex')}`;
      recordSecret(value);
      const stored = await api.post('/keys/store', { instance_id: onWorker.instance_id, keys: { OPENAI_API_KEY: value } });
      expect(stored.status, stored.text).toBe(200);
      const restarted = await api.post(`/instance/restart/${onWorker.instance_id}`);
      expect(restarted.status, restarted.text).toBe(200);
      const env = await waitFor(
        'the agent to have its key',
        async () => {
          const r = await agentVia(onWorker.url, '/env', WORKER).catch(() => undefined);
          return r?.sha256.OPENAI_API_KEY ? r : undefined;
        },
        180_000,
        500,
      ).catch(async (err: Error) => {
        // What the agent and the platform said meanwhile: the failure names its cause.
        const status = await api.get(`/instance/status/${onWorker.instance_id}`);
        const logs = await api.get(`/instance/logs/${onWorker.instance_id}?tail=30`);
        throw new Error(`${err.message}; status ${JSON.stringify(status.body)}; agent log:\n${(logs.body.lines ?? [logs.text]).join('\n')}`);
      });
      expect(env.sha256.OPENAI_API_KEY).toBe(createHash('sha256').update(value).digest('hex'));
      // Its logs, from the worker, through a manager's Engine API.
      await waitFor(
        'the agent log through the API',
        async () => {
          const logs = await api.get(`/instance/logs/${onWorker.instance_id}?tail=50`);
          expect(logs.status).toBe(200);
          return logs.body.lines.join('\n').includes('keys fetched');
        },
        30_000,
        1000,
      );
      await doctorSeesDrift(onWorker.instance_id, WORKER);
    } catch (err) {
      // Leave nothing behind for the next run on this machine (the assertions below run only on success).
      for (const id of ids) await api.del(`/instance/delete/${id}`).catch(() => {});
      throw err;
    }
    for (const id of ids) {
      const d = await api.del(`/instance/delete/${id}`);
      expect(d.status, d.text).toBe(200);
    }
    for (const id of ids) expect(await leftovers(id)).toEqual([]);
    expect((await api.get('/instance/list')).body.instances).toEqual([]);
  }, 900_000);

  it('scales the gateway from 2 to 3 replicas and down to 1 and back under a steady authenticated load without one error', async () => {
    const session = await signIn(apiClient(apiUrl()));
    // Enterprise: no per-minute limit, so every refusal would be the scaling's.
    await subscribe({ chain: swarmChain }, session, { tier: 'enterprise' });
    const failures: string[] = [];
    let ok = 0;
    let stop = false;
    // Four clients, each one request after another, against both nodes' edges.
    const clients = [MANAGER, WORKER, MANAGER, WORKER].map(async (host) => {
      const api = apiClient(apiUrl(host), session.token);
      while (!stop) {
        const r = await api.get('/subscription/status').catch((e: Error) => ({ status: 0, text: e.message }));
        if (r.status === 200) ok++;
        else failures.push(`${r.status} ${r.text.slice(0, 200)}`);
      }
    });
    for (const n of [3, 1, 2]) {
      await scale(`gateway=${n}`);
      expect(await runningTasks('agenthost-gateway')).toHaveLength(n);
    }
    stop = true;
    await Promise.all(clients);
    expect(failures).toEqual([]);
    expect(ok).toBeGreaterThan(100);
  }, 600_000);

  it('backs up an instance on the worker, drains the node: its instances move to the other with their data, keys and access token and run again there, then its platform tasks; back in service the platform spreads again; the deleted instance comes back from its backup', async () => {
    const session = await signIn(apiClient(apiUrl()));
    await subscribe({ chain: swarmChain }, session, { tier: 'pro' });
    const api = session.api;
    const ids: string[] = [];
    const tokens = new Map<string, string>();
    const workerNode = (await worker.info()).Swarm.NodeID as string;
    type Agent = { state: { born: string; boots: number }; sha256: Record<string, string> };
    const agent = (url: string, path = '/'): Promise<Agent> => agentVia(url, path);
    let [backedUp, backupId, born] = ['', '', ''];
    const sha = (s: string) => createHash('sha256').update(s).digest('hex');
    try {
      for (let i = 0; i < 3; i++) {
        const r = await api.post('/instance/create', { framework: 'openclaw' });
        expect(r.status, r.text).toBe(200);
        recordSecret(r.body.access_token);
        ids.push(r.body.instance_id);
        tokens.set(r.body.instance_id, r.body.access_token);
      }
      const status = async (id: string) => (await api.get(`/instance/status/${id}`)).body;
      const views = await Promise.all(ids.map((id) => waitFor(`running ${id}`, () => statusIs(api, id, 'running'), 180_000, 500)));
      const placed = await Promise.all(views.map((v) => nodeOf(v.instance_id)));
      const moving = views.filter((_, i) => placed[i] === WORKER);
      expect(moving.length).toBeGreaterThan(0);
      // A backup on the swarm: the volume streamed from the worker to the provisioner, the agent stopped for the
      // copy and started again (a boot more, before the move's are counted).
      backedUp = moving[0]!.instance_id;
      const b = await api.post(`/instance/backup/${backedUp}`);
      expect(b.status, b.text).toBe(200);
      expect(b.body.size_bytes).toBeGreaterThan(0);
      backupId = b.body.backup_id;
      born = (await waitFor('the agent back after its backup', () => agent(moving[0]!.url).catch(() => undefined), 180_000, 500)).state.born;
      // Each agent on the worker has state in its volume (the stand-in counts its boots there) and a key.
      const before = new Map<string, { born: string; boots: number }>();
      const keys = new Map<string, string>();
      for (const v of moving) {
        before.set(v.instance_id, (await agent(v.url)).state);
        const value = `sk-drain-${randomBytes(16).toString('hex')}`;
        recordSecret(value);
        keys.set(v.instance_id, value);
        const stored = await api.post('/keys/store', { instance_id: v.instance_id, keys: { OPENAI_API_KEY: value } });
        expect(stored.status, stored.text).toBe(200);
      }

      // Resolves once no instance is left on the worker and the swarm drained it.
      await nodeCommand('drain', workerNode);
      expect((await manager.getNode(workerNode).inspect()).Spec.Availability).toBe('drain');
      for (const v of moving) {
        const id = v.instance_id as string;
        // Moved already (the drain waited for that): running again once its agent is ready.
        const moved = await waitFor(
          `${id} running on the manager`,
          async () => {
            const now = await status(id);
            return now.status === 'running' ? now : undefined;
          },
          120_000,
          500,
        );
        expect(await nodeOf(id), `the node ${id} runs on after the drain`).toBe(MANAGER);
        expect(moved.instance_id).toBe(id);
        // Its URL did not change: the edge routes it to its new node (the drained worker runs no edge any more).
        expect(moved.url, `the URL of ${id}`).toBe(v.url);
        // Same data (one boot more), the key stored before the move, the same access token.
        const state = (await agent(moved.url)).state;
        expect(state, `${id}'s volume after its move (before: ${JSON.stringify(before.get(id))})`).toEqual({
          ...state,
          born: before.get(id)!.born,
          boots: before.get(id)!.boots + 1,
        });
        const env = await agent(moved.url, '/env');
        expect(env.sha256.OPENAI_API_KEY, `the key stored in ${id} before its move`).toBe(sha(keys.get(id)!));
        expect(env.sha256.OPENCLAW_GATEWAY_TOKEN, `the access token of ${id}`).toBe(sha(tokens.get(id)!));
        // Its old volume goes from the drained node (a janitor job there, after the move).
        await waitFor(
          `the old volume of ${id} gone from the worker`,
          async () => (await worker.listVolumes({ filters: JSON.stringify({ label: [`agenthost.instance=${id}`] }) })).Volumes.length === 0,
          120_000,
          1000,
        );
      }
      // The instances that were on the manager never stopped.
      for (const v of views.filter((x) => !moving.includes(x)))
        expect((await agent(v.url)).state, `${v.instance_id}, on the manager all along`).toMatchObject({ boots: 1 });
    } finally {
      for (const id of ids) await api.del(`/instance/delete/${id}`).catch(() => {});
      // Back in service: the platform spreads over both nodes again.
      await nodeCommand('activate', workerNode);
    }
    for (const id of ids) expect(await leftovers(id)).toEqual([]);
    await expectSpread();
    // Deleted, and back from its backup: a new instance holding the backup's files.
    const c = await api.post(`/instance/clone/${backedUp}`, { backup_id: backupId });
    expect(c.status, c.text).toBe(200);
    recordSecret(c.body.access_token);
    try {
      const clone = await waitFor('the restored instance running', () => statusIs(api, c.body.instance_id, 'running'), 180_000, 500);
      expect((await waitFor('its agent', () => agent(clone.url).catch(() => undefined), 60_000, 500)).state.born).toBe(born);
    } finally {
      await api.del(`/instance/delete/${c.body.instance_id}`);
    }
    expect(await leftovers(c.body.instance_id)).toEqual([]);
  }, 900_000);

  it('chaos under load: a replica of each service and a NATS node killed, then the worker node crashes (every process SIGKILLed) and comes back; only requests in flight fail, quotas stay exact, nothing is orphaned', async () => {
    await chaosUnderLoad();
  }, 1_200_000);
});
