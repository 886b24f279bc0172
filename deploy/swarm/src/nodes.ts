import type Docker from 'dockerode';
import { DRAIN_LABEL, JOB_SERVICE_LABEL, pinnedNode, writeAtVersion } from '@agenthost/shared';

/**
 * Taking a node out of service and back. The provisioner moves the instances of a node labelled DRAIN_LABEL
 * with their volumes while the node stays active: a node in the swarm's own drain runs no task at all, not even
 * the jobs that copy a volume off it. Once none is left, the swarm's drain moves the platform's tasks.
 */
const INSTANCE_LABEL = 'agenthost.instance';

type NodeSpec = { Labels?: Record<string, string>; Availability?: string; Role?: string; Name?: string };
type NodeInfo = Awaited<ReturnType<Docker['listNodes']>>[number];

async function findNode(docker: Docker, ref: string): Promise<NodeInfo> {
  const nodes = await docker.listNodes();
  const node = nodes.find((n) => n.ID === ref || n.Description?.Hostname === ref || n.ID?.startsWith(ref));
  if (!node) throw new Error(`no node "${ref}" (docker node ls lists them)`);
  return node;
}

async function updateNode(docker: Docker, id: string, change: (spec: NodeSpec) => NodeSpec): Promise<void> {
  await writeAtVersion(
    async () => {
      const info = await docker.getNode(id).inspect();
      return { version: info.Version.Index as number, spec: info.Spec as NodeSpec };
    },
    (version, spec) => docker.getNode(id).update({ version, ...spec }),
    change,
  );
}

/**
 * Instance services pinned to the node, and the provisioner's jobs there (its preparation, volume copies and
 * removals): those need the node active too. A move starts the old volume's removal before the instance's service
 * leaves the node.
 */
async function instancesOn(docker: Docker, nodeId: string): Promise<string[]> {
  const pinned = async (label: string) =>
    (await docker.listServices({ filters: JSON.stringify({ label: [label] }) }))
      .filter((s) => pinnedNode(s.Spec?.TaskTemplate?.Placement?.Constraints) === nodeId)
      .map((s) => s.Spec!.Name!);
  return [...(await pinned(INSTANCE_LABEL)), ...(await pinned(JOB_SERVICE_LABEL))];
}

export async function drainNode(docker: Docker, ref: string, timeoutMs: number, log: (s: string) => void): Promise<void> {
  const node = await findNode(docker, ref);
  await updateNode(docker, node.ID!, (spec) => ({ ...spec, Labels: { ...spec.Labels, [DRAIN_LABEL]: 'true' } }));
  const end = Date.now() + timeoutMs;
  let last = -1;
  for (;;) {
    const left = await instancesOn(docker, node.ID!);
    if (!left.length) break;
    if (left.length !== last) log(`${left.length} instance(s) or job(s) of ours still on ${ref}, moving`);
    last = left.length;
    if (Date.now() > end)
      throw new Error(
        `${left.length} instance(s) or job(s) of ours still on ${ref} after ${Math.round(timeoutMs / 1000)} s (see the provisioner's log); the node stays labelled draining`,
      );
    await new Promise((r) => setTimeout(r, 2000));
  }
  log(`no instance left on ${ref}: the swarm drains its platform tasks`);
  await updateNode(docker, node.ID!, (spec) => ({ ...spec, Availability: 'drain' }));
  // Done when no task is meant to run there any more and none still runs (the swarm moves them one by one).
  for (;;) {
    const tasks = await docker.listTasks({ filters: JSON.stringify({ node: [node.ID!] }) });
    const left = tasks.filter((t) => t.DesiredState === 'running' || t.Status?.State === 'running');
    if (!left.length) break;
    if (Date.now() > end) throw new Error(`${left.length} task(s) still on ${ref} after ${Math.round(timeoutMs / 1000)} s`);
    await new Promise((r) => setTimeout(r, 1000));
  }
  log(`${ref} is drained`);
}

export async function activateNode(docker: Docker, ref: string): Promise<void> {
  const node = await findNode(docker, ref);
  await updateNode(docker, node.ID!, (spec) => {
    const { [DRAIN_LABEL]: _, ...labels } = spec.Labels ?? {};
    return { ...spec, Labels: labels, Availability: 'active' };
  });
}
