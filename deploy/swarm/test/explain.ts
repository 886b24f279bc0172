import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pinnedNode } from '@agenthost/shared';
import { type apiClient, waitFor } from '../../../packages/testkit/src/index.ts';
import { manager } from './helpers.ts';

// A wait on the swarm that fails says what the swarm showed at that moment: CI keeps only the failure's message,
// and an instance that never ran is explained by its node's state and its tasks' refusals, not by the API's view.

type Api = ReturnType<typeof apiClient>;
const logDir = path.join(process.env.AGENTHOST_STATE ?? '/var/lib/agenthost', 'log');
/** Each node's hostname by its id. */
const hostnames = (nodes: Awaited<ReturnType<typeof manager.listNodes>>) => new Map(nodes.map((n) => [n.ID, n.Description?.Hostname ?? n.ID]));

/** The nodes' states, the newest tasks of an instance's service (node, state, refusal), and, with a node not ready, the worker engine's last errors. */
export async function swarmView(instanceId?: string): Promise<string> {
  const nodes = await manager.listNodes();
  const names = hostnames(nodes);
  const lines = nodes.map(
    (n) => `node ${n.Description?.Hostname}: ${n.Status?.State}${n.Status?.Message ? ` (${n.Status.Message})` : ''}, ${n.Spec?.Availability}`,
  );
  if (instanceId) {
    const tasks = await manager.listTasks({ filters: JSON.stringify({ service: [`agenthost-${instanceId}`] }) });
    tasks.sort((a, b) => Date.parse(b.UpdatedAt ?? '') - Date.parse(a.UpdatedAt ?? ''));
    for (const t of tasks.slice(0, 4))
      lines.push(`task on ${names.get(t.NodeID)}: ${t.Status?.State} (desired ${t.DesiredState})${t.Status?.Err ? `: ${t.Status.Err}` : ''}`);
    if (!tasks.length) lines.push('no task');
  }
  if (nodes.some((n) => n.Status?.State !== 'ready')) {
    const errors = readFileSync(path.join(logDir, 'dockerd-node2.log'), 'utf8')
      .split('\n')
      .filter((l) => /level=(error|fatal)|panic/.test(l) && !/net\.ipv4\.vs|default vlan|plugin refcount/.test(l));
    lines.push(`worker engine: ${errors.slice(-5).join(' | ') || 'no error logged'}`);
  }
  return lines.join('; ');
}

/** The instance's view once it runs; one that failed is waited on too (node_down comes back by itself), and a timeout says what the swarm shows of it. */
export async function waitRunning(api: Api, id: string, timeoutMs = 180_000, what = `${id} running`): Promise<any> {
  try {
    return await waitFor(
      what,
      async () => {
        const r = await api.get(`/instance/status/${id}`);
        if (r.body.status === 'failed') throw new Error(`instance failed: ${r.text}`);
        return r.status === 200 && r.body.status === 'running' ? r.body : undefined;
      },
      timeoutMs,
      500,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}\nswarm: ${await swarmView(id).catch((e: Error) => `not read (${e.message})`)}`);
  }
}

/** Every instance service the swarm holds: name, replicas, the node it is pinned to, and its age. */
export async function instanceServices(): Promise<string> {
  const names = hostnames(await manager.listNodes());
  const services = await manager.listServices({ filters: JSON.stringify({ label: ['agenthost.instance'] }) });
  return services
    .map((s) => {
      const pin = pinnedNode(s.Spec?.TaskTemplate?.Placement?.Constraints);
      const age = Math.round((Date.now() - Date.parse(s.CreatedAt ?? '')) / 1000);
      return `${s.Spec?.Name} ×${s.Spec?.Mode?.Replicated?.Replicas ?? '?'} on ${pin ? names.get(pin) : 'no node'} (${age} s old)`;
    })
    .join('; ');
}
