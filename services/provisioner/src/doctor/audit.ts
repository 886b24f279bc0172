import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow } from '../db/schema.ts';
import type { InstanceReads } from '../domain/instance-reads.ts';
import { firewallTag, hostDnsServers, hostSubnets, missingFirewallRules } from '../docker/firewall.ts';
import { containerName, LABEL_INSTANCE, LABEL_SCOPE } from '../docker/spec.ts';
import { auditContainer, busy, healthy, imageLookup, type DoctorReport, type Finding, type Intent } from './checks.ts';
import { auditSwarm } from './swarm-audit.ts';

/**
 * Audit every instance of one provisioner (its scope on the engine, its rows in the database) and the instance
 * network and host firewall it keeps (the docker driver's; swarm-audit.ts the swarm's). Reads only; the fixes are
 * printed, never applied.
 */
export async function audit(d: { config: ProvisionerConfig; instances: Pick<InstanceReads, 'all'>; docker: Docker }): Promise<DoctorReport> {
  const { config, instances, docker } = d;
  if (config.PROVISIONER_DRIVER === 'swarm') return auditSwarm(d);
  const scope = config.INSTANCE_SCOPE || config.INSTANCE_NETWORK;
  const drift: Finding[] = [];
  const notes: Finding[] = [];
  const intent: Intent = { network: config.INSTANCE_NETWORK, publishHost: config.PUBLISH_HOST, extraEnv: Object.keys(config.INSTANCE_EXTRA_ENV_JSON) };

  drift.push(...(await auditNetwork(config, docker)));

  const filters = { label: [`${LABEL_SCOPE}=${scope}`] };
  // Docker before the rows, as the reconciler does: a row always exists before its container.
  const containers = await docker.listContainers({ all: true, filters });
  const volumes = (await docker.listVolumes({ filters })).Volumes ?? [];
  // Size-limited volume files (VOLUME_QUOTA=enforce) of this scope, where context.ts places them.
  const volumeDir = join(config.VOLUME_DIR || join(process.env.AGENTHOST_STATE || '/var/lib/agenthost', 'volumes'), scope);
  const volumeFiles = await readdir(volumeDir).catch(() => [] as string[]);
  const rows = await instances.all();
  const byId = new Map(rows.map((r) => [r.id, r]));

  for (const c of containers) {
    const id = c.Labels?.[LABEL_INSTANCE];
    if (id && !byId.has(id))
      drift.push({
        instance_id: id,
        check: 'orphan',
        problem: `container ${c.Names?.[0]?.slice(1) ?? c.Id} has no instance in the database`,
        fix: `docker rm -f ${c.Id.slice(0, 12)} (the provisioner's reconciler also removes it)`,
      });
  }
  for (const v of volumes) {
    const id = v.Labels?.[LABEL_INSTANCE];
    if (id && !byId.has(id))
      drift.push({
        instance_id: id,
        check: 'orphan',
        problem: `volume ${v.Name} has no instance in the database`,
        fix: `docker volume rm ${v.Name} (the provisioner's reconciler also removes it)`,
      });
  }

  for (const file of volumeFiles) {
    const id = file.replace(/\.ext4(\.new)?$/, '');
    if (id !== file && !byId.has(id))
      drift.push({
        instance_id: id,
        check: 'orphan',
        problem: `volume file ${join(volumeDir, file)} has no instance in the database`,
        fix: "the provisioner's reconciler removes it (with its mount and loop device) at its next pass; start the provisioner if it is not running",
      });
  }

  const image = imageLookup(docker);
  for (const row of rows) {
    const working = busy(row);
    if (working) {
      notes.push(working);
      continue;
    }
    const info = await docker
      .getContainer(containerName(row.id))
      .inspect()
      .catch(() => undefined);
    if (!info) {
      // A failed one without a container is what the reconciler recorded (its reason says so): its owner's to restart.
      (row.status === 'failed' ? notes : drift).push({
        instance_id: row.id,
        check: 'container',
        problem: `the ${row.status} instance has no container`,
        fix: `its owner restarts it (POST /api/instance/restart/${row.id})`,
      });
      continue;
    }
    const built = await image(info.Image);
    drift.push(...auditContainer(row, info, built, intent));
    // Pinned instances run the image ID recorded at create or upgrade: a container on another image is drift; a tag
    // that moved since is an update for the owner to take (POST /instance/upgrade), not drift.
    const pinned = row.image_digest ?? (await image(row.image))?.Id;
    if (!pinned)
      drift.push({
        instance_id: row.id,
        check: 'image',
        problem: `its image ${row.image} is not on this engine`,
        fix: 'bash deploy/images/build.sh (or docker pull it)',
      });
    else if (pinned !== info.Image) {
      drift.push({
        instance_id: row.id,
        check: 'image',
        problem: `runs ${info.Image.slice(7, 19)}, but it is pinned to ${pinned.slice(7, 19)}`,
        fix: `its owner restarts it (POST /api/instance/restart/${row.id}) to run its pinned image`,
      });
    } else if (row.image_digest && (await image(row.image))?.Id !== row.image_digest) {
      notes.push({
        instance_id: row.id,
        check: 'image',
        problem: `${row.image} now names another image than the one it is pinned to`,
        fix: `its owner upgrades it (POST /api/instance/upgrade/${row.id}) to run the rebuilt image`,
      });
    }
    await auditHealth(row, info, config, drift, notes);
  }
  return { scope, ok: drift.length === 0, instances: rows.length, drift, notes };
}

/** The instance bridge (no traffic between containers) and every host firewall rule the provisioner installs. */
async function auditNetwork(config: ProvisionerConfig, docker: Docker): Promise<Finding[]> {
  const out: Finding[] = [];
  const restartProvisioner =
    'restart the provisioner (supervisorctl -c /var/lib/agenthost/supervisor/supervisord.conf restart provisioner): at start and every RECONCILE_INTERVAL_SECONDS it puts the network and the whole ordered rule set back';
  const net = (await docker
    .getNetwork(config.INSTANCE_NETWORK)
    .inspect()
    .catch(() => undefined)) as Docker.NetworkInspectInfo | undefined;
  if (!net) return [{ check: 'network', problem: `the instance network ${config.INSTANCE_NETWORK} does not exist`, fix: restartProvisioner }];
  const options = net.Options ?? {};
  if (options['com.docker.network.bridge.enable_icc'] !== 'false')
    out.push({
      check: 'network',
      problem: `${config.INSTANCE_NETWORK} lets containers talk to each other`,
      fix: `remove the network once no instance uses it (docker network rm ${config.INSTANCE_NETWORK}), then ${restartProvisioner}`,
    });
  const bridge = options['com.docker.network.bridge.name'];
  if (config.FIREWALL === 'enforce' && bridge) {
    const missing = await missingFirewallRules({
      bridge,
      gatewayPort: config.GATEWAY_PORT,
      tag: firewallTag(config.INSTANCE_NETWORK),
      dnsServers: hostDnsServers(),
      hostSubnets: hostSubnets(),
    });
    for (const r of missing)
      out.push({ check: 'firewall', problem: `host firewall rule missing from ${r.chain}: ${r.rule.join(' ')}`, fix: restartProvisioner });
  }
  return out;
}

/** A running instance's container runs and its agent answers /healthz; a stopped one's does not run. */
async function auditHealth(row: InstanceRow, info: Docker.ContainerInspectInfo, config: ProvisionerConfig, drift: Finding[], notes: Finding[]): Promise<void> {
  const logs = `see its logs (GET /api/instance/logs/${row.id}) and restart it (POST /api/instance/restart/${row.id})`;
  if (row.step === 'backoff') {
    notes.push({
      instance_id: row.id,
      check: 'health',
      problem: `its agent crashed (${row.last_exit_reason}); restarted at ${new Date(row.next_restart_at!).toISOString()}`,
      fix: 'none: the self-healing restarts it',
    });
  } else if (row.status === 'running') {
    if (!info.State.Running)
      drift.push({
        instance_id: row.id,
        check: 'health',
        problem: 'is running in the database but its container is not',
        fix: 'none needed if the provisioner runs: its reconciler restarts the agent; otherwise start the provisioner',
      });
    else if (info.State.Paused)
      drift.push({
        instance_id: row.id,
        check: 'health',
        problem: 'is running in the database but its container is paused',
        fix: `docker unpause ${containerName(row.id)}`,
      });
    else if (!(await healthy(config.PUBLISH_HOST, row.port)))
      drift.push({ instance_id: row.id, check: 'health', problem: `its agent does not answer GET /healthz on port ${row.port}`, fix: logs });
  } else if (row.status === 'sleeping' && row.sleep_depth === 'checkpointed') {
    // Checkpointed, the agent's processes are in its sealed image and hold-init alone runs, unpaused, for the restore.
    if (!info.State.Running)
      drift.push({
        instance_id: row.id,
        check: 'health',
        problem: 'sleeps checkpointed in the database but its container is not running',
        fix: 'none needed if the provisioner runs: its checkpoint is of processes that no longer exist, so the next request boots the agent afresh; otherwise start the provisioner',
      });
    else if (info.State.Paused)
      drift.push({
        instance_id: row.id,
        check: 'health',
        problem: 'sleeps checkpointed in the database but its container is paused',
        fix: `docker unpause ${containerName(row.id)}`,
      });
  } else if (row.status === 'sleeping' && row.sleep_depth !== 'stopped' && !(info.State.Running && info.State.Paused)) {
    drift.push({
      instance_id: row.id,
      check: 'health',
      problem: `sleeps ${row.sleep_depth} in the database but its container is ${info.State.Running ? 'not paused' : 'not running'}`,
      fix: 'none needed if the provisioner runs: its reconciler wakes it or lets it sleep stopped; otherwise start the provisioner',
    });
  } else if ((row.status === 'stopped' || row.status === 'sleeping') && info.State.Running && !(row.status === 'sleeping' && row.sleep_depth !== 'stopped')) {
    drift.push({
      instance_id: row.id,
      check: 'health',
      problem: `is ${row.status} in the database but its container runs`,
      fix: `docker stop ${containerName(row.id)}`,
    });
  } else if (row.status === 'failed') {
    notes.push({ instance_id: row.id, check: 'health', problem: `failed: ${row.failure_reason ?? 'no reason recorded'}`, fix: logs });
  }
}
