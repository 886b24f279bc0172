import { expect } from 'vitest';
import { apiClient, signIn, subscribe, waitFor } from '../../../packages/testkit/src/index.ts';
import { doctor } from './doctor.ts';
import { agentVia } from './edge.ts';
import { waitRunning } from './explain.ts';
import { apiUrl, expectUsageExact, runningTasks, statusIs, steadyLoad, swarmChain, twoNode } from './helpers.ts';

type Api = ReturnType<typeof apiClient>;
type Observed = Map<string, Array<{ status: string; failure_reason?: string }>>;

/** An answer the load may get while a node is lost: 200, or a 503 in the error shape (`steadyLoad` keeps the rest). */
const SHAPED_503 = /^503 \{"error":"[^"]+","code":"[A-Z_]+","status":503/;

/**
 * The worker crashes under a load through the manager's edge: its engine, containerd and every container SIGKILLed at
 * once, as a machine that loses power. Its instances turn failed with node_down (within 30 s), the doctor lists each
 * with its node and the fix, and once the engine is started again they run by themselves within 60 s of its return,
 * with their volume's data. Every request during the loss is answered 200 or with a shaped 503, and counted exactly.
 */
export async function workerCrashUnderLoad(api: Api, views: Array<{ instance_id: string; url: string }>, onManager: string[], observed: Observed) {
  const onWorker = views.map((v) => v.instance_id);
  const nodeUser = await signIn(apiClient(apiUrl()));
  await subscribe({ chain: swarmChain }, nodeUser, { tier: 'enterprise' });
  // What each agent on the worker keeps in its volume (the stand-in counts its boots there).
  const before = await Promise.all(views.map(async (v) => (await agentVia(v.url)).state));
  const load = steadyLoad(nodeUser.token, 4, '/instance/list');
  load.managerOnly = true;
  await twoNode('crash-worker');
  // The view asserted on is the one that said failed (a second request could meet a replica that died with the node).
  for (const id of onWorker) {
    const v = await waitFor(`node_down ${id}`, () => statusIs(api, id, 'failed'), 30_000, 500);
    expect(v.failure_reason, JSON.stringify(v)).toBe('node_down');
    observed.get(id)!.push({ status: 'failed', failure_reason: 'node_down' });
  }
  for (const id of onManager) expect((await api.get(`/instance/status/${id}`)).body.status, id).toBe('running');
  // The operator's view while the node is away: each of its instances, with what to do.
  const { report } = await doctor();
  for (const id of onWorker) {
    const finding = report.drift.find((f) => f.instance_id === id && f.check === 'node');
    expect(finding?.problem, JSON.stringify(report)).toMatch(/^failed with node_down: node agenthost-n2 is down/);
    expect(finding?.fix).toMatch(/node-engine\.sh before-start/);
  }

  await twoNode('start-worker');
  const back = Date.now();
  const times: number[] = [];
  for (const id of onWorker) {
    await waitRunning(api, id, Math.max(1, back + 60_000 - Date.now()), `${id} running again`);
    times.push(Date.now() - back);
    observed.get(id)!.push({ status: 'running' });
  }
  console.log(`node crash: instances running again ${times.join(', ')} ms after the engine's return`);
  // Same volume: the same birth, one boot more.
  for (const [i, v] of views.entries()) {
    const now = await waitFor(`${v.instance_id} answering`, () => agentVia(v.url).catch(() => undefined), 30_000, 500);
    expect(now.state, v.instance_id).toEqual({ ...before[i], boots: before[i]!.boots + 1 });
  }
  await waitFor("the worker's edge back", async () => (await runningTasks('agenthost-edge')).length === 2, 180_000, 1000);
  load.managerOnly = false;
  await new Promise((r) => setTimeout(r, 2000));
  const { ok, failures } = await load.end();
  console.log(`node crash: ${ok} answered, ${failures.length} refused:\n${failures.join('\n')}`);
  expect(ok).toBeGreaterThan(100);
  expect(failures.filter((f) => !SHAPED_503.test(f))).toEqual([]);
  await expectUsageExact(nodeUser.token, ok, failures.length, 4);
}
