import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { pinnedNode, retry, writeAtVersion, type Logger } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceRow } from '../db/schema.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { ignoreGone, o } from '../docker/call.ts';
import { demux } from '../docker/logs.ts';
import { LABEL_INSTANCE, LABEL_SCOPE, TOKEN_ENV } from '../docker/spec.ts';
import { exportInstance, importInstance, LABEL_COPYING, type CopyOps } from './backup-copy.ts';
import { NODE_DOWN, type Credentials, type InstanceRuntime, type ManagedObject, type RuntimeState } from '../domain/runtime.ts';
import { nodeFirewall, SwarmInstanceNetwork } from './instance-network.ts';
import { removeVolumeOnNode } from './janitor.ts';
import { managedObjects, watchNodes } from './swarm-objects.ts';
import { newestRefusal, nodeFault, staleNetworkReason, staleNetworkRepeated } from './node-faults.ts';
import { nodeByAddr, pickNode } from './placement.ts';
import { waitPortReleased } from './port-release.ts';
import { credentialsSecretPrefix, instanceServiceSpec, networkName, type Spec, serviceName, volumeName } from './spec.ts';

/** How long a node that came back must stay ready before its given-up instances are started anew. */
const NODE_SETTLE_MS = 20_000;

const STARTING = new Set(['new', 'pending', 'assigned', 'accepted', 'preparing', 'ready', 'starting']);

/**
 * The `swarm` driver: an instance is a swarm service (replicas 1 started, 0 stopped) pinned to the node with
 * the most unreserved memory, on that node's instance bridge, with its volume on that node and its credentials as
 * a swarm secret replaced at every start. Driven through a manager's Engine API.
 */
export class SwarmInstances implements InstanceRuntime {
  readonly kind = 'swarm' as const;
  /** When each ready node was last seen coming back (0: ready when first seen), from watchNodes. */
  private readonly readySince = new Map<string, number>();
  private readonly deps: {
    engine: DockerEngine;
    config: ProvisionerConfig;
    scope: string;
    log: Logger;
    /** The gateway's key URL as instances on a node reach it. */
    keysUrl(host: string): string;
    /** Security options the engine's API version allows beyond 1.41 (checked at start). */
    extraSecurity: { noNewPrivileges: boolean };
    /** Runs placement one at a time across every provisioner replica (a database lock). */
    serialize<T>(fn: () => Promise<T>): Promise<T>;
  };

  private readonly network: SwarmInstanceNetwork;
  constructor(deps: SwarmInstances['deps']) {
    this.deps = deps;
    this.network = new SwarmInstanceNetwork({
      engine: deps.engine,
      scope: deps.scope,
      jobImage: deps.config.SWARM_JANITOR_IMAGE,
      log: deps.log,
      ...(deps.config.FIREWALL === 'enforce' ? { firewall: nodeFirewall(deps.config) } : {}),
    });
  }

  private service(id: string) {
    return this.deps.engine.docker.getService(serviceName(id));
  }

  private async spec(id: string): Promise<{ version: number; spec: Spec } | undefined> {
    const info = await ignoreGone(this.deps.engine.run('service inspect', (abortSignal) => this.service(id).inspect(o({ abortSignal }))));
    return info ? { version: info.Version.Index, spec: info.Spec as Spec } : undefined;
  }

  /** Read, change and write the service (false: it is missing); `change` returning false: nothing to write. */
  private updateService(id: string, change: (s: Spec) => boolean | void): Promise<boolean> {
    return writeAtVersion(
      () => this.spec(id),
      (version, spec) => this.deps.engine.run('service update', () => this.service(id).update({ version, ...spec })),
      (spec) => (change(spec) === false ? undefined : spec),
    );
  }

  async create(row: InstanceRow, token: string): Promise<{ runtimeId: string; host: string }> {
    const { engine, config } = this.deps;
    const existing = await ignoreGone(engine.run('service inspect', (abortSignal) => this.service(row.id).inspect(o({ abortSignal }))));
    if (existing) return { runtimeId: existing.ID, host: row.node_host ?? '' };
    const image = (await engine.run('image inspect', (abortSignal) => engine.docker.getImage(row.image).inspect(o({ abortSignal })))).Id;
    // A recreate keeps the node (the volume is there); a new instance gets the roomiest one. Choosing and creating
    // happen under one lock shared by every provisioner replica: concurrent creates see the reservations before theirs.
    const pinned = row.node_host ? await nodeByAddr(engine, row.node_host) : undefined;
    if (pinned && row.node_host) return this.createOn(row, token, image, { id: pinned, addr: row.node_host });
    return this.deps.serialize(async () => this.createOn(row, token, image, await pickNode(engine, row.memory_mb, row.cpus * config.SWARM_CPU_RESERVATION)));
  }

  private async createOn(row: InstanceRow, token: string, image: string, node: { id: string; addr: string }): Promise<{ runtimeId: string; host: string }> {
    const { engine, config, scope } = this.deps;
    await this.network.ensure(node.id);
    const spec = instanceServiceSpec({
      instanceId: row.id,
      userId: row.user_id,
      scope,
      image,
      node: node.id,
      network: this.network.name,
      port: row.port,
      memoryMb: row.memory_mb,
      cpus: row.cpus,
      reserveCpus: row.cpus * config.SWARM_CPU_RESERVATION,
      pids: row.pids,
      tmpfsMb: config.TMPFS_SIZE_MB,
      restartDelaySeconds: Math.max(1, Math.round(config.RESTART_BACKOFF_INITIAL_MS / 1000)),
      stopTimeoutSeconds: config.STOP_TIMEOUT_SECONDS,
      extraSecurity: this.deps.extraSecurity,
      env: {
        ...config.INSTANCE_EXTRA_ENV_JSON,
        AGENTHOST_INSTANCE_ID: row.id,
        AGENTHOST_KEYS_URL: this.deps.keysUrl(node.addr),
        ...(config.KEYS_HOT_RELOAD === 'on' ? { AGENTHOST_KEYS_WATCH: '1' } : {}),
        [TOKEN_ENV]: token,
      },
    });
    const created = (await engine.run('service create', () => engine.docker.createService(spec))) as { id?: string; ID?: string };
    return { runtimeId: created.id ?? created.ID ?? spec.Name, host: node.addr };
  }

  async start(id: string, creds: Credentials): Promise<void> {
    const { engine } = this.deps;
    const secretName = `${credentialsSecretPrefix(id)}${randomBytes(6).toString('hex')}`;
    const secret = (await engine.run('secret create', () =>
      engine.docker.createSecret({
        Name: secretName,
        Data: Buffer.from(`${JSON.stringify(creds)}\n`).toString('base64'),
        Labels: { [LABEL_INSTANCE]: id, [LABEL_SCOPE]: this.deps.scope },
      }),
    )) as { id?: string; ID?: string };
    const found = await this.updateService(id, (s) => {
      s.TaskTemplate.ContainerSpec!.Secrets = [
        { SecretID: secret.id ?? secret.ID, SecretName: secretName, File: { Name: 'agenthost-credentials', UID: '10001', GID: '10001', Mode: 0o400 } },
      ];
      s.TaskTemplate.ForceUpdate = (s.TaskTemplate.ForceUpdate ?? 0) + 1;
      s.Mode = { Replicated: { Replicas: 1 } };
    });
    if (!found) throw Object.assign(new Error(`service ${serviceName(id)} is missing`), { statusCode: 404 });
    // The old credentials are dead (keyvault issued new ones); their secrets go once their tasks have.
    setTimeout(() => void this.dropSecrets(id, secretName), 30_000).unref();
  }

  private async dropSecrets(id: string, keep?: string): Promise<void> {
    const { engine } = this.deps;
    const secrets = await engine
      .run('secret list', (abortSignal) => engine.docker.listSecrets(o({ filters: { label: [`${LABEL_INSTANCE}=${id}`] }, abortSignal })))
      .catch(() => []);
    for (const s of secrets)
      if (s.Spec?.Name !== keep) await engine.run('secret remove', (abortSignal) => engine.docker.getSecret(s.ID).remove(o({ abortSignal }))).catch(() => {});
  }

  async token(id: string): Promise<string | undefined> {
    const entry = (await this.spec(id))?.spec.TaskTemplate.ContainerSpec?.Env?.find((e) => e.startsWith(`${TOKEN_ENV}=`));
    return entry ? entry.slice(TOKEN_ENV.length + 1) : undefined;
  }

  /** Replicas 0, and wait (up to the stop timeout and a margin) until its task has stopped. */
  async stop(id: string): Promise<void> {
    const found = await this.updateService(id, (s) => {
      if (s.Mode?.Replicated?.Replicas === 0) return false;
      s.Mode = { Replicated: { Replicas: 0 } };
    });
    if (!found) return;
    await this.waitNoTasks(serviceName(id), (this.deps.config.STOP_TIMEOUT_SECONDS + 15) * 1000);
  }

  /** The tasks of a service (by name, or by id: a removed service's tasks are found by its id only) still running or starting. */
  private async runningTasks(service: string) {
    const { engine } = this.deps;
    const tasks = await engine.run('task list', (abortSignal) => engine.docker.listTasks(o({ filters: { service: [service] }, abortSignal })));
    return tasks.filter((t) => t.Status?.State === 'running' || STARTING.has(t.Status?.State ?? ''));
  }

  private async waitNoTasks(service: string, timeoutMs: number): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end && (await this.runningTasks(service).catch(() => [])).length) await sleep(250);
  }

  /**
   * Remove the service and wait (up to 30 s) until its task stopped and its host port is free for a recreate's task:
   * by the service's id (once removed, its name finds no tasks), then by the port (port-release.ts).
   */
  async remove(id: string): Promise<void> {
    const { engine } = this.deps;
    const svc = await ignoreGone(engine.run('service inspect', (abortSignal) => this.service(id).inspect(o({ abortSignal }))));
    if (!svc) return;
    const nodes = (await this.runningTasks(svc.ID).catch(() => [])).map((t) => t.NodeID ?? '');
    await ignoreGone(engine.run('service remove', (abortSignal) => this.service(id).remove(o({ abortSignal }))));
    const end = Date.now() + 30_000;
    await this.waitNoTasks(svc.ID, 30_000);
    const port = svc.Spec?.EndpointSpec?.Ports?.[0]?.PublishedPort;
    if (port) await waitPortReleased(engine, nodes, port, Math.max(0, end - Date.now()));
  }

  /** The volume on its node (a janitor job), then the overlay of its moves (if it moved) and the credential secrets. */
  async removeVolume(id: string, host?: string | null): Promise<void> {
    const { engine, config, scope, log } = this.deps;
    const node = host ? await nodeByAddr(engine, host) : undefined;
    if (node && config.SWARM_JANITOR_IMAGE) {
      const ok = await removeVolumeOnNode(engine, { node, volume: volumeName(id), image: config.SWARM_JANITOR_IMAGE, scope, timeoutMs: 90_000 });
      if (!ok) throw new Error(`the volume of ${id} could not be removed on node ${node}`);
    } else if (node) {
      log.warn({ instance_id: id, node }, 'SWARM_JANITOR_IMAGE is not set: the instance volume stays on its node');
    }
    // Refused while a task of the removed service still holds an endpoint on it; after 20 tries it is left, secrets go.
    const removeNetwork = () => ignoreGone(engine.run('network remove', (abortSignal) => engine.docker.getNetwork(networkName(id)).remove(o({ abortSignal }))));
    await retry(removeNetwork, { attempts: 20, delayMs: 500 }).catch(() => {});
    await this.dropSecrets(id);
  }

  async inspect(id: string): Promise<RuntimeState> {
    const { engine } = this.deps;
    const current = await this.spec(id);
    if (!current) return { state: 'missing' };
    if (current.spec.Labels?.[LABEL_COPYING]) return { state: 'starting' };
    const node = pinnedNode(current.spec.TaskTemplate.Placement?.Constraints);
    if (node && (current.spec.Mode?.Replicated?.Replicas ?? 0) > 0) {
      const info = await ignoreGone(engine.run('node inspect', (abortSignal) => engine.docker.getNode(node).inspect(o({ abortSignal }))));
      if (info?.Status?.State !== 'ready') return { state: 'node_down', error: NODE_DOWN };
    }
    const tasks = await engine.run('task list', (abortSignal) => engine.docker.listTasks(o({ filters: { service: [serviceName(id)] }, abortSignal })));
    // The task the swarm means to run wins over one it is shutting down, even if that one changed last (an old
    // task of a node that came back is marked shut down after its replacement was made).
    const wanted = tasks.filter((t) => t.DesiredState === 'running');
    const latest = (wanted.length ? wanted : tasks).sort((a, b) => Date.parse(b.UpdatedAt ?? '') - Date.parse(a.UpdatedAt ?? ''))[0];
    const state = latest?.Status?.State ?? '';
    // A node a crash left without its instance network refuses each try: the newest refusals say why (node-faults.ts).
    const fault = node && current.spec.Mode?.Replicated?.Replicas && state !== 'running' ? nodeFault(newestRefusal(tasks)) : undefined;
    if (fault === 'stale-network' && staleNetworkRepeated(tasks)) return { state: 'node_down', error: staleNetworkReason(node!) };
    if (fault === 'unprepared') return this.network.repair(node!, this.deps.log, { state: 'starting' });
    if (!latest) return { state: current.spec.Mode?.Replicated?.Replicas ? 'starting' : 'created' };
    if (state === 'running' && latest.DesiredState === 'running') return { state: 'running', startedAt: Date.parse(latest.Status?.Timestamp ?? '') };
    // No node for it: its pinned node is full (fails now), or still frees the port of a stopped task (the swarm retries).
    const err = state === 'pending' ? (latest.Status?.Err ?? '') : '';
    if (/no suitable node/.test(err))
      return /port already in use/.test(err) ? { state: 'starting' } : { state: 'exited', error: `No node can run it now: ${err}` };
    if (STARTING.has(state) && latest.DesiredState === 'running') return { state: 'starting' };
    const exit = latest.Status?.ContainerStatus?.ExitCode;
    // A task that failed is replaced while restarts remain: only the last one's failure is final.
    if (latest.DesiredState === 'running') return { state: 'starting' };
    return { state: 'exited', exitCode: exit ?? 0, ...(latest.Status?.Err ? { error: `The agent stopped: ${latest.Status.Err}` } : {}) };
  }

  /** Backups: the volume copied from and to its node, as a drain moves it (backup-copy.ts). */
  exportData = (id: string, sink: (tar: NodeJS.ReadableStream) => Promise<void>): Promise<void> => exportInstance(this.copyOps, id, sink);
  importData = (row: InstanceRow, tar: NodeJS.ReadableStream): Promise<void> => importInstance(this.copyOps, row, tar);

  private readonly copyOps: CopyOps = {
    engine: () => this.deps.engine,
    scope: () => this.deps.scope,
    spec: async (id) => (await this.spec(id))?.spec,
    update: (id, change) => this.updateService(id, change),
    waitStopped: (id) => this.waitNoTasks(serviceName(id), (this.deps.config.STOP_TIMEOUT_SECONDS + 15) * 1000),
  };

  async logs(id: string, tail: number): Promise<string> {
    const { engine } = this.deps;
    const raw = await ignoreGone(
      engine.run('service logs', (abortSignal) => this.service(id).logs(o({ stdout: true, stderr: true, follow: false, tail, abortSignal }))),
    );
    return raw === undefined ? '' : Buffer.isBuffer(raw) ? demux(raw) : String(raw);
  }

  async followLogs(id: string, from: { since?: string; tail?: number }): Promise<NodeJS.ReadableStream | undefined> {
    const { engine } = this.deps;
    const opts = { stdout: true, stderr: true, follow: true, timestamps: true, ...(from.since ? { since: from.since } : { tail: from.tail ?? 200 }) };
    return ignoreGone(engine.run('service logs follow', (abortSignal) => this.service(id).logs(o({ ...opts, abortSignal })))) as Promise<
      NodeJS.ReadableStream | undefined
    >;
  }

  async managed(): Promise<ManagedObject[]> {
    return managedObjects(this.deps.engine, this.deps.scope, (id) => this.remove(id));
  }

  /**
   * Calls `changed` whenever a node's state, availability or drain label changes, checked every `everyMs`: the
   * reconciler then fails the instances of a node that went away (node_down) and brings back those of a node
   * that returned; the drainer moves those of a draining node.
   */
  watchNodes(changed: () => void, everyMs = 2000): () => void {
    // A node that comes back (its engine restarted, or the machine rebooted and lost its firewall rules) is prepared again.
    const returned = (node: string) =>
      void this.network.prepare(node).catch((err: unknown) => this.deps.log.warn({ err, node }, 'could not prepare a returning node again'));
    // Every node's published ports let the swarm's nodes through: when the set of nodes changes (and at start), each
    // ready node whose rules name another set is prepared again (ensure: a node already right costs one inspect).
    const regrouped = (nodes: string[]) =>
      nodes.forEach((node) => void this.network.ensure(node).catch((err: unknown) => this.deps.log.warn({ err, node }, 'could not prepare a node again')));
    return watchNodes(this.deps.engine, this.readySince, changed, everyMs, returned, regrouped);
  }

  async nodeSettled(row: Pick<InstanceRow, 'node_host'>): Promise<boolean> {
    const node = row.node_host ? await nodeByAddr(this.deps.engine, row.node_host) : undefined;
    const since = node ? this.readySince.get(node) : undefined;
    return since !== undefined && Date.now() - since >= NODE_SETTLE_MS;
  }

  probeHost(row: Pick<InstanceRow, 'node_host'>): string {
    return row.node_host ?? '127.0.0.1';
  }
}
