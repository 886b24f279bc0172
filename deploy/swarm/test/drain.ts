import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { apiClient, recordSecret, signIn, subscribe, waitFor } from '../../../packages/testkit/src/index.ts';
import { apiUrl, expectSpread, leftovers, manager, MANAGER, nodeCommand, swarmChain, worker, WORKER } from './helpers.ts';
import { agentVia, nodeOf } from './edge.ts';
import { waitRunning } from './explain.ts';

// The drain scenario of the swarm suite (swarm.test.ts runs it on the stack it deployed): a backup on the worker, the
// worker drained (its instances move with their volumes), back in service, and the deleted instance restored.

export async function drainAndBack(): Promise<void> {
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
    const views = await Promise.all(ids.map((id) => waitRunning(api, id)));
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
    const clone = await waitRunning(api, c.body.instance_id, 180_000, 'the restored instance running');
    expect((await waitFor('its agent', () => agent(clone.url).catch(() => undefined), 60_000, 500)).state.born).toBe(born);
  } finally {
    await api.del(`/instance/delete/${c.body.instance_id}`);
  }
  expect(await leftovers(c.body.instance_id)).toEqual([]);
}
