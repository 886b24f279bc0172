import type Docker from 'dockerode';
import { pinnedNode } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow } from '../db/schema.ts';
import type { InstanceReads } from '../domain/instance-reads.ts';
import { AGENT_PORT, AGENT_USER, LABEL_INSTANCE, LABEL_SCOPE } from '../docker/spec.ts';
import { NODE_DOWN } from '../domain/runtime.ts';
import { instanceNetworkName, readyLabel, readyValue } from '../swarm/instance-network.ts';
import { newestRefusal } from '../swarm/node-faults.ts';
import { nodeAddr } from '../swarm/placement.ts';
import { serviceName, volumeName } from '../swarm/spec.ts';
import { apiAtLeast } from '../docker/engine.ts';
import { auditSecrets, busy, healthy, imageLookup, type DoctorReport, type Finding } from './checks.ts';

type ServiceSpec = Docker.ServiceSpec & {
  TaskTemplate?: {
    ContainerSpec?: Docker.ContainerSpec & { Init?: boolean; CapabilityDrop?: string[]; CapabilityAdd?: string[]; Privileges?: { NoNewPrivileges?: boolean } };
    Resources?: { Limits?: { MemoryBytes?: number; NanoCPUs?: number; Pids?: number } };
    Networks?: Array<{ Target?: string }>;
    Placement?: { Constraints?: string[] };
  };
  EndpointSpec?: { Ports?: Array<{ TargetPort?: number; PublishedPort?: number; PublishMode?: string }> };
};

const MB = 1024 * 1024;
const restart = (id: string) => `recreate it from the intended spec: its owner restarts it (POST /api/instance/restart/${id})`;

/**
 * The swarm driver's audit, from a manager's engine: every instance service of this scope against its row (the
 * hardening, limits, mounts, network, port and node the provisioner gave it, its image, no credential in its spec),
 * its task and agent, the services without an instance, and every node its instances run on prepared (the instance
 * bridge and, with FIREWALL=enforce, its host firewall: the node's label says so once the job that installs it ran).
 */
export async function auditSwarm(d: { config: ProvisionerConfig; instances: Pick<InstanceReads, 'all'>; docker: Docker }): Promise<DoctorReport> {
  const { config, instances, docker } = d;
  const scope = config.INSTANCE_SCOPE || config.INSTANCE_NETWORK;
  const drift: Finding[] = [];
  const notes: Finding[] = [];
  const services = (await docker.listServices({ filters: { label: [`${LABEL_SCOPE}=${scope}`] } })) as Array<{ ID: string; Spec?: ServiceSpec }>;
  const rows = await instances.all();
  const byId = new Map(rows.map((r) => [r.id, r]));
  const nodes = await docker.listNodes();
  const network = instanceNetworkName(scope);
  const networkId = (
    (await docker
      .getNetwork(network)
      .inspect()
      .catch(() => undefined)) as { Id?: string } | undefined
  )?.Id;
  const version = await docker.version();
  const noNewPrivileges = apiAtLeast(version.ApiVersion, 1, 44);

  const instanceServices = new Map<string, { ID: string; Spec?: ServiceSpec }>();
  for (const s of services) {
    const id = s.Spec?.Labels?.[LABEL_INSTANCE];
    // Only instance services (the jobs that prepare nodes and copy volumes carry the scope too, under other names).
    if (!id || s.Spec?.Name !== serviceName(id)) continue;
    instanceServices.set(id, s);
    if (!byId.has(id))
      drift.push({
        instance_id: id,
        check: 'orphan',
        problem: `service ${s.Spec.Name} has no instance in the database`,
        fix: `docker service rm ${s.Spec.Name}`,
      });
  }
  if (!networkId && rows.some((r) => !r.deleting_at))
    drift.push({ check: 'network', problem: `the instance network ${network} does not exist`, fix: 'restart the provisioner: it makes the network again' });

  const label = readyLabel(network);
  const ready = readyValue(config.FIREWALL === 'enforce');
  const nodeOf = new Map(nodes.map((n) => [nodeAddr(n), n]));
  for (const n of nodes) {
    if (n.Spec?.Labels?.[label] === ready) continue;
    const name = n.Description?.Hostname ?? n.ID;
    const used = rows.some((r) => !r.deleting_at && r.node_host === nodeAddr(n));
    const problem = `node ${name} is not prepared for instances (label ${label} is ${n.Spec?.Labels?.[label] ?? 'absent'}, not ${ready})${config.FIREWALL === 'enforce' ? ': no host firewall for its instances' : ''}`;
    const fix = `docker node update --label-rm ${label} ${n.ID} if the label is set; the provisioner prepares the node when it next places an instance there, and when the node comes back (restart its Docker engine to have it done now)`;
    (used ? drift : notes).push({ check: 'node', problem, fix });
  }

  const image = imageLookup(docker);
  const imageId = async (ref: string) => (await image(ref))?.Id;
  for (const row of rows) {
    const working = busy(row);
    if (working) {
      notes.push(working);
      continue;
    }
    const svc = instanceServices.get(row.id);
    if (!svc?.Spec) {
      // A failed one without a service is what the provisioner recorded (its reason says so): its owner's to restart.
      (row.status === 'failed' ? notes : drift).push({
        instance_id: row.id,
        check: 'service',
        problem: `the ${row.status} instance has no service`,
        fix: restart(row.id),
      });
      continue;
    }
    const node = row.node_host ? nodeOf.get(row.node_host) : undefined;
    drift.push(...auditSpec(row, svc.Spec, { network, networkId, noNewPrivileges, node: node?.ID }));
    const cs = svc.Spec.TaskTemplate?.ContainerSpec ?? {};
    const recreate = restart(row.id);
    drift.push(
      ...auditSecrets(
        row,
        { Env: cs.Env, Labels: { ...svc.Spec.Labels, ...cs.Labels }, Entrypoint: cs.Command, Cmd: cs.Args },
        undefined,
        Object.keys(config.INSTANCE_EXTRA_ENV_JSON),
        recreate,
      ),
    );
    const pinned = row.image_digest ?? (await imageId(row.image));
    if (pinned && cs.Image !== pinned)
      drift.push({ instance_id: row.id, check: 'image', problem: `runs ${cs.Image}, but it is pinned to ${pinned.slice(7, 19)}`, fix: recreate });
    if (row.status === 'failed' && row.failure_reason === NODE_DOWN) drift.push(await nodeDown(row, svc.ID, node, docker));
    else await auditTask(row, svc.ID, docker, drift, notes);
  }
  return { scope, ok: drift.length === 0, instances: rows.length, drift, notes };
}

/** The service's spec against the row: what instanceServiceSpec (swarm/spec.ts) gave it. */
function auditSpec(
  row: InstanceRow,
  spec: ServiceSpec,
  intent: { network: string; networkId: string | undefined; noNewPrivileges: boolean; node: string | undefined },
): Finding[] {
  const out: Finding[] = [];
  const fix = restart(row.id);
  const drift = (check: string, problem: string) => out.push({ instance_id: row.id, check, problem, fix });
  const t = spec.TaskTemplate ?? {};
  const cs = t.ContainerSpec ?? {};
  if (cs.User !== AGENT_USER) drift('user', `runs as "${cs.User || 'root'}", not ${AGENT_USER}`);
  if (JSON.stringify(cs.CapabilityDrop ?? []) !== '["ALL"]') drift('capabilities', `drops ${JSON.stringify(cs.CapabilityDrop ?? [])}, not ["ALL"]`);
  if ((cs.CapabilityAdd ?? []).length) drift('capabilities', `adds ${(cs.CapabilityAdd ?? []).join(', ')}`);
  if (intent.noNewPrivileges && !cs.Privileges?.NoNewPrivileges) drift('no-new-privileges', 'may gain privileges (no-new-privileges is not set)');
  if (!cs.ReadOnly) drift('read-only root', 'has a writable root filesystem');
  if (!cs.Init) drift('init', 'has no init process as PID 1');
  const limits = t.Resources?.Limits ?? {};
  if (limits.MemoryBytes !== row.memory_mb * MB) drift('memory limit', `memory ${limits.MemoryBytes ?? 0} B, intended ${row.memory_mb * MB} B`);
  if (limits.NanoCPUs !== Math.round(row.cpus * 1e9)) drift('cpu limit', `CPU limit ${(limits.NanoCPUs ?? 0) / 1e9}, intended ${row.cpus}`);
  if (limits.Pids !== row.pids) drift('pids limit', `pids limit ${limits.Pids ?? 'none'}, intended ${row.pids}`);
  const foreign = (cs.Mounts ?? []).filter(
    (m) => !(m.Type === 'volume' && m.Target === '/data' && m.Source === volumeName(row.id)) && !(m.Type === 'tmpfs' && m.Target === '/tmp'),
  );
  if (foreign.length) drift('mounts', `mounts ${foreign.map((m) => `${m.Type} ${m.Source ?? ''} at ${m.Target}`).join(', ')} beside its volume and /tmp`);
  const nets = (t.Networks ?? []).map((n) => n.Target);
  // The swarm keeps the network's id in the spec; a spec written by hand may name it.
  if (nets.length !== 1 || !nets[0] || ![intent.networkId, intent.network].includes(nets[0]))
    drift('network', `is on ${JSON.stringify(nets)}, not only on ${intent.network}`);
  const ports = spec.EndpointSpec?.Ports ?? [];
  const port = ports[0];
  if (ports.length !== 1 || port?.TargetPort !== AGENT_PORT || port.PublishedPort !== row.port || port.PublishMode !== 'host')
    drift('published port', `publishes ${JSON.stringify(ports)}, intended ${row.port} → ${AGENT_PORT} in host mode only`);
  const on = pinnedNode(t.Placement?.Constraints);
  if (!intent.node || on !== intent.node) drift('node', `is pinned to ${on ?? 'no node'}, but its row (and volume) is on ${row.node_host ?? 'no node'}`);
  const replicas = spec.Mode?.Replicated?.Replicas ?? 0;
  const wanted = row.status === 'running' || row.status === 'provisioning' ? 1 : row.status === 'failed' ? replicas : 0;
  if (replicas !== wanted)
    out.push({
      instance_id: row.id,
      check: 'replicas',
      problem: `${replicas} replica(s) for a ${row.status} instance`,
      fix: `docker service scale ${serviceName(row.id)}=${wanted}`,
    });
  return out;
}

/** A running instance's task runs and its agent answers /healthz on its node; a stopped one runs no task. */
async function auditTask(row: InstanceRow, serviceId: string, docker: Docker, drift: Finding[], notes: Finding[]): Promise<void> {
  const tasks = (await docker.listTasks({ filters: { service: [serviceId], 'desired-state': ['running'] } })) as Array<{ Status?: { State?: string } }>;
  const running = tasks.some((t) => t.Status?.State === 'running');
  const logs = `see its logs (GET /api/instance/logs/${row.id}) and restart it (POST /api/instance/restart/${row.id})`;
  if (row.step === 'backoff') {
    notes.push({
      instance_id: row.id,
      check: 'health',
      problem: `its agent crashed (${row.last_exit_reason}); being restarted`,
      fix: 'none: the self-healing restarts it',
    });
  } else if (row.status === 'running') {
    if (!running)
      drift.push({
        instance_id: row.id,
        check: 'health',
        problem: `is running in the database but its task is ${tasks[0]?.Status?.State ?? 'absent'}`,
        fix: 'none needed if the provisioner runs: it follows the task; otherwise start the provisioner',
      });
    else if (!row.node_host || !(await healthy(row.node_host, row.port)))
      drift.push({ instance_id: row.id, check: 'health', problem: `its agent does not answer GET /healthz at ${row.node_host}:${row.port}`, fix: logs });
  } else if ((row.status === 'stopped' || row.status === 'sleeping') && running) {
    drift.push({
      instance_id: row.id,
      check: 'health',
      problem: `is ${row.status} in the database but its task runs`,
      fix: `docker service scale ${serviceName(row.id)}=0`,
    });
  } else if (row.status === 'failed') {
    notes.push({ instance_id: row.id, check: 'health', problem: `failed: ${row.failure_reason ?? 'no reason recorded'}`, fix: logs });
  }
}

/**
 * An instance failed with node_down: its node is away (start it again; if it is lost for good, so is the volume there),
 * or back but refusing its task (a crashed engine that kept stale network state: restart it with its store set aside).
 */
async function nodeDown(
  row: InstanceRow,
  serviceId: string,
  node: Awaited<ReturnType<Docker['listNodes']>>[number] | undefined,
  docker: Docker,
): Promise<Finding> {
  const name = node?.Description?.Hostname ?? row.node_host ?? 'unknown';
  const engine = `start the Docker engine of node ${name} with deploy/swarm/node-engine.sh before-start run first (docs/deploy/swarm.md, "A node that crashes")`;
  if (node?.Status?.State === 'ready') {
    const tasks = (await docker.listTasks({ filters: { service: [serviceId] } })) as Array<{ UpdatedAt?: string; Status?: { Err?: string } }>;
    const refusal = newestRefusal(tasks) || 'no error recorded';
    return {
      instance_id: row.id,
      check: 'node',
      problem: `failed with node_down: node ${name} is back but refuses its task (${refusal})`,
      fix: `stop and ${engine}`,
    };
  }
  const state = `${node?.Status?.State ?? 'gone from the swarm'}${node?.Status?.Message ? `: ${node.Status.Message}` : ''}`;
  return {
    instance_id: row.id,
    check: 'node',
    problem: `failed with node_down: node ${name} is ${state}; its volume is there`,
    fix: `${engine}; the instance runs again by itself. If the node is lost for good, clone it from its latest backup (POST /api/instance/clone/${row.id}) and delete it`,
  };
}
