import { createHash } from 'node:crypto';
import Docker from 'dockerode';
import { writeAtVersion } from '@agenthost/shared';
import { LABEL_STACK, NETWORK, STACK, SUBNET } from './stack.ts';

/**
 * Creating and updating the stack through the Engine API (as Dokploy and CapRover do), not with
 * `docker stack deploy`, which drops security options (capabilities, read-only root, groups).
 */

type Spec = Docker.ServiceSpec & { Name: string };

export const dockerFrom = (host = process.env.DOCKER_HOST ?? ''): Docker =>
  host.startsWith('tcp://')
    ? new Docker({ host: new URL(host).hostname, port: Number(new URL(host).port) })
    : new Docker({ socketPath: host.replace(/^unix:\/\//, '') || '/var/run/docker.sock' });

/** The overlay every part of the stack talks on (not attachable: no stray container can join it). */
export async function ensureNetwork(docker: Docker): Promise<void> {
  const existing = await docker.listNetworks({ filters: JSON.stringify({ name: [NETWORK] }) });
  if (existing.some((n) => n.Name === NETWORK)) return;
  await docker.createNetwork({
    Name: NETWORK,
    Driver: 'overlay',
    Attachable: false,
    CheckDuplicate: true,
    IPAM: { Driver: 'default', Config: [{ Subnet: SUBNET }] },
    Labels: { [LABEL_STACK]: STACK },
  });
}

/**
 * Each secret as a swarm secret named after its content (secrets are immutable): a changed secret is a new
 * name, which the service update rolls out; the old one is removed once no service uses it.
 */
export async function ensureSecrets(docker: Docker, secrets: Record<string, string>): Promise<Record<string, { id: string; name: string }>> {
  const existing = new Map((await docker.listSecrets({ filters: JSON.stringify({ label: [`${LABEL_STACK}=${STACK}`] }) })).map((s) => [s.Spec!.Name!, s.ID]));
  const out: Record<string, { id: string; name: string }> = {};
  for (const [key, content] of Object.entries(secrets)) {
    const name = `${STACK}-${key.replace(/[^A-Za-z0-9_.-]/g, '-')}-${createHash('sha256').update(content).digest('hex').slice(0, 12)}`;
    let id = existing.get(name);
    if (!id) {
      const created = (await docker.createSecret({
        Name: name,
        Data: Buffer.from(content).toString('base64'),
        Labels: { [LABEL_STACK]: STACK, 'agenthost.secret': key },
      })) as { id?: string; ID?: string };
      id = created.id ?? created.ID ?? (await docker.getSecret(name).inspect()).ID;
    }
    out[key] = { id: id!, name };
  }
  return out;
}

/** Remove our secrets that no service refers to any more (the engine refuses to remove one in use). */
export async function pruneSecrets(docker: Docker, keep: Set<string>): Promise<void> {
  for (const s of await docker.listSecrets({ filters: JSON.stringify({ label: [`${LABEL_STACK}=${STACK}`] }) })) {
    if (!keep.has(s.ID))
      await docker
        .getSecret(s.ID)
        .remove()
        .catch(() => {});
  }
}

export async function findService(docker: Docker, name: string): Promise<Docker.Service | undefined> {
  const list = await docker.listServices({ filters: JSON.stringify({ name: [name] }) });
  const found = list.find((s) => s.Spec?.Name === name);
  return found ? docker.getService(found.ID) : undefined;
}

/** Create the service, or update it to this spec (a rolling, health-gated update when the task changed). */
export async function upsertService(docker: Docker, spec: Spec): Promise<'created' | 'updated'> {
  const svc = await findService(docker, spec.Name);
  if (!svc) {
    await docker.createService(spec);
    return 'created';
  }
  // Keep the count of forced updates (a rebalance's): a different one would replace every task again.
  await writeService(svc, (current) => ({
    ...spec,
    TaskTemplate: { ...spec.TaskTemplate, ForceUpdate: (current.TaskTemplate as { ForceUpdate?: number } | undefined)?.ForceUpdate },
  }));
  return 'updated';
}

export async function setReplicas(docker: Docker, name: string, replicas: number): Promise<void> {
  const svc = await findService(docker, name);
  if (!svc) throw new Error(`no service ${name}`);
  await writeService(svc, (spec) => {
    if (!spec.Mode?.Replicated) throw new Error(`${name} is not a replicated service`);
    return { ...spec, Mode: { Replicated: { Replicas: replicas } } };
  });
}

export async function currentReplicas(docker: Docker, name: string): Promise<number | undefined> {
  const svc = await findService(docker, name);
  return svc ? ((await svc.inspect()).Spec as Spec).Mode?.Replicated?.Replicas : undefined;
}

/** Running tasks of a service, and how many it should have (global: one per node that may run it). */
export async function taskCounts(docker: Docker, name: string): Promise<{ running: number; desired: number; updating: boolean }> {
  const svc = await findService(docker, name);
  if (!svc) return { running: 0, desired: 0, updating: false };
  const info = await svc.inspect();
  const tasks = await docker.listTasks({ filters: JSON.stringify({ service: [name], 'desired-state': ['running'] }) });
  const running = tasks.filter((t) => t.Status?.State === 'running').length;
  const spec = info.Spec as Spec;
  // A global service has a task per eligible node; right after it is created it may have none yet.
  const desired = spec.Mode?.Replicated ? (spec.Mode.Replicated.Replicas ?? 1) : Math.max(1, tasks.length);
  const state = (info as { UpdateStatus?: { State?: string } }).UpdateStatus?.State;
  return { running, desired, updating: state === 'updating' || state === 'rollback_started' };
}

/** Wait until every named service runs its desired number of (healthy) tasks and no update is rolling. */
export async function waitConverged(docker: Docker, names: string[], timeoutMs: number, log: (s: string) => void = () => {}): Promise<void> {
  const end = Date.now() + timeoutMs;
  let last = '';
  const surplusSince = new Map<string, number>();
  for (;;) {
    const counts = await Promise.all(names.map(async (n) => [n, await taskCounts(docker, n)] as const));
    const waiting = counts.filter(([, c]) => c.running !== c.desired || c.updating);
    if (!waiting.length) return;
    // The engine (20.10) can leave two running tasks in one slot when a node's availability changes during a
    // start-first update, and never fixes it: after 30 s of surplus with no update rolling, replace the tasks.
    for (const [n, c] of counts) {
      if (c.running <= c.desired || c.updating) surplusSince.delete(n);
      else if (!surplusSince.has(n)) surplusSince.set(n, Date.now());
      else if (Date.now() - surplusSince.get(n)! > 30_000) {
        log(`${n} runs ${c.running} tasks for ${c.desired}: replacing them`);
        await forceUpdate(docker, n);
        surplusSince.delete(n);
      }
    }
    const line = waiting.map(([n, c]) => `${n} ${c.running}/${c.desired}${c.updating ? ' (updating)' : ''}`).join(', ');
    if (line !== last) log(`waiting: ${line}`);
    last = line;
    if (Date.now() > end) throw new Error(`not converged after ${Math.round(timeoutMs / 1000)} s: ${line}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** The node Postgres is pinned to: the one labelled agenthost.postgres=true, else this manager (labelled now). */
export async function pinPostgres(docker: Docker): Promise<string> {
  const nodes = await docker.listNodes();
  const pinned = nodes.find((n) => n.Spec?.Labels?.['agenthost.postgres'] === 'true');
  if (pinned) return pinned.ID;
  const self = (await docker.info()).Swarm.NodeID as string;
  const node = docker.getNode(self);
  const info = await node.inspect();
  await node.update({ version: info.Version.Index, ...info.Spec, Labels: { ...info.Spec.Labels, 'agenthost.postgres': 'true' } });
  return self;
}

export async function imageId(docker: Docker, ref: string): Promise<string> {
  return (await docker.getImage(ref).inspect()).Id;
}

/**
 * Spread the replicated services whose running tasks all sit on one node while another ready node could take
 * some: the swarm places a task only when it starts and never moves it, so after a node was away every replica
 * stays where it was restarted. Each is replaced one task at a time, stop-first: with the old task gone first,
 * the scheduler (fewest tasks of the service wins) puts the new one on the other node; start-first would count
 * the old task still running and could pile the new ones onto the emptier node. The other replicas serve
 * meanwhile. Resolves once they converged; returns the services it spread.
 */
export async function rebalance(docker: Docker, names: string[], timeoutMs: number, log: (s: string) => void): Promise<string[]> {
  const ready = (await docker.listNodes()).filter((n) => n.Status?.State === 'ready' && n.Spec?.Availability === 'active');
  if (ready.length < 2) return [];
  const spread: string[] = [];
  for (const name of names) {
    const svc = await findService(docker, name);
    if (!svc) continue;
    // Decide on a settled service: tasks still being moved (a node just drained or back) would mislead.
    await waitConverged(docker, [name], timeoutMs, log);
    const info = await svc.inspect();
    const spec = info.Spec as Spec;
    if ((spec.Mode?.Replicated?.Replicas ?? 0) < 2 || spec.TaskTemplate?.Placement?.Constraints?.length) continue;
    const tasks = await docker.listTasks({ filters: JSON.stringify({ service: [name], 'desired-state': ['running'] }) });
    if (new Set(tasks.map((t) => t.NodeID)).size > 1) continue;
    log(`spreading ${name} over the nodes`);
    await replaceTasks(docker, name, spec.Mode?.Replicated?.Replicas ?? 0, timeoutMs, { Order: 'stop-first' });
    // The service's own update order back (an UpdateConfig change alone replaces no task).
    await writeService(svc, (after) => ({ ...after, UpdateConfig: spec.UpdateConfig }));
    spread.push(name);
  }
  return spread;
}

/**
 * Replace every task of a service (a forced update) and resolve once each of its `replicas` is a new one and runs:
 * the update starts a moment after the write, so a service that merely looks converged may not have begun.
 */
export async function replaceTasks(
  docker: Docker,
  name: string,
  replicas: number,
  timeoutMs: number,
  updateConfig: Partial<Docker.UpdateConfig> = {},
): Promise<void> {
  const forced = await forceUpdate(docker, name, updateConfig);
  const end = Date.now() + timeoutMs;
  for (;;) {
    const now = await docker.listTasks({ filters: JSON.stringify({ service: [name], 'desired-state': ['running'] }) });
    const fresh = now.filter((t) => t.Status?.State === 'running' && (t.Spec as { ForceUpdate?: number } | undefined)?.ForceUpdate === forced);
    if (fresh.length === replicas && now.length === replicas) return;
    if (Date.now() > end) throw new Error(`${name}'s tasks were not replaced after ${Math.round(timeoutMs / 1000)} s`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * Replace every task of a service, one at a time (a forced update), with its update settings overridden if asked.
 * Returns the new ForceUpdate count, which every replacement task carries in its spec.
 */
async function forceUpdate(docker: Docker, name: string, updateConfig: Partial<Docker.UpdateConfig> = {}): Promise<number | undefined> {
  const svc = await findService(docker, name);
  if (!svc) return undefined;
  let forced = 0;
  await writeService(svc, (spec) => {
    const template = spec.TaskTemplate as Docker.TaskSpec & { ForceUpdate?: number };
    forced = (template.ForceUpdate ?? 0) + 1;
    return { ...spec, TaskTemplate: { ...template, ForceUpdate: forced }, UpdateConfig: { ...spec.UpdateConfig, ...updateConfig } as Docker.UpdateConfig };
  });
  return forced;
}

/** Read, change and write a service at the version read (the swarm writes its services too: writeAtVersion). */
async function writeService(svc: Docker.Service, change: (current: Spec) => Spec): Promise<void> {
  await writeAtVersion(
    async () => {
      const info = await svc.inspect();
      return { version: info.Version.Index, spec: info.Spec as Spec };
    },
    (version, spec) => svc.update({ version, ...spec }),
    change,
  );
}
