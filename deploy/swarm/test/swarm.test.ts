import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, recordSecret, signIn, subscribe, waitFor } from '../../../packages/testkit/src/index.ts';
import {
  apiUrl,
  deployStack,
  leftovers,
  manager,
  MANAGER,
  twoNode,
  removeStrayInstances,
  runningTasks,
  saveServiceLogs,
  scale,
  SCALED,
  swarmChain,
  WORKER,
  worker,
} from './helpers.ts';
import { chaosUnderLoad } from './chaos.ts';
import { drainAndBack } from './drain.ts';
import { doctorSeesDrift } from './doctor.ts';
import { expectIsolated } from './isolation.ts';
import { waitRunning } from './explain.ts';
import { agentReaches, agentVia, DOMAIN, EDGE_HTTP_PORT, edgeOrigin, nodeOf, nodeReach, plainVia, viaEdge } from './edge.ts';

// The stack on a two-node swarm (the second engine in its own network namespace), used as a wallet holder and a
// developer would: every call goes through a node's edge to the gateways. The deployment's secret material is kept
// where deploy keeps it: a second run updates the same stack (a new CA and new identities at once would not roll).
const state = process.env.AGENTHOST_STATE ?? '/var/lib/agenthost';
/** The stack's instance bridge (its provisioner's scope, `agenthost-instances`, and `-swarm`). */
const INSTANCE_BRIDGE = 'agenthost-instances-swarm';

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

      const views = await Promise.all(ids.map((id) => waitRunning(api, id)));
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
    // The worker's instance bridge outlives its last instance there: the anchor's task keeps it (swarm/anchor.ts), so
    // no later create on that node meets the bridge being taken down or made again.
    const instanceContainers = async () => (await worker.listContainers({ all: true, filters: JSON.stringify({ label: ['agenthost.instance'] }) })).length;
    await waitFor('no instance container left on the worker', async () => (await instanceContainers()) === 0, 60_000, 500);
    const bridges = await worker.listNetworks({ filters: JSON.stringify({ name: [INSTANCE_BRIDGE] }) });
    expect(bridges.map((n) => n.Name)).toContain(INSTANCE_BRIDGE);
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

  it(
    'backs up an instance on the worker, drains the node: its instances move to the other with their data, keys and access token and run again there, then its platform tasks; back in service the platform spreads again; the deleted instance comes back from its backup',
    () => drainAndBack(),
    900_000,
  );

  it('chaos under load: a replica of each service and a NATS node killed, then the worker node crashes (every process SIGKILLed) and comes back; only requests in flight fail, quotas stay exact, nothing is orphaned', async () => {
    await chaosUnderLoad();
  }, 1_200_000);
});
