import { type Logger, writeAtVersion } from '@agenthost/shared';
import type { DockerEngine } from '../docker/engine.ts';
import { dockerStatus, o } from '../docker/call.ts';
import { firewallTag } from '../docker/firewall.ts';
import { bridgeOf, inspectNetwork } from '../docker/network.ts';
import { anchorSpec, ensureAnchor } from './anchor.ts';
import { runJob, socketOf } from './janitor.ts';
import { nodeSources, sourcesDigest } from './node-firewall.ts';
import type { NodeSetup } from './node-setup.ts';

/** Between two repairs of one node (repair()): longer than the job that prepares it takes. */
const REPAIR_MS = 30_000;

/** Apart from the docker driver's bridge of the same scope (`INSTANCE_NETWORK`), which a manager's engine may also run. */
export const instanceNetworkName = (scope: string): string => `${scope}-swarm`;
const configName = (name: string) => `${name}-config`;
/** The node label that says the node is prepared for instances (the doctor reads it too). */
export const readyLabel = (name: string) => `agenthost.network.${name}`;
/** The node label holding the digest of the node addresses its published-port rules let through (node-firewall.ts). */
const sourcesLabel = (name: string) => `agenthost.network.${name}.sources`;
/** The port of INSTANCE_GATEWAY_URL (`http://{host}:<port>/api`): the only one an instance may reach on its node. */
export function edgePortOf(url: string): number {
  const u = URL.parse(url.replaceAll('{host}', 'node'));
  if (!u) throw new Error(`swarm: INSTANCE_GATEWAY_URL must be the URL instances reach the API at, http://{host}:<port>/api (it is "${url}")`);
  return Number(u.port || (u.protocol === 'https:' ? 443 : 80));
}

/** The host firewall of every node with FIREWALL=enforce: the edge's instance port (the only one an instance reaches on its node) and the instance ports. */
export const nodeFirewall = (c: { INSTANCE_GATEWAY_URL: string; PORT_RANGE_START: number; PORT_RANGE_END: number }) => ({
  gatewayPort: edgePortOf(c.INSTANCE_GATEWAY_URL),
  instancePorts: [c.PORT_RANGE_START, c.PORT_RANGE_END] as [number, number],
});

/**
 * The label's value once the node is ready: a node prepared before nodes had a firewall, or before the firewall kept
 * the published ports to the swarm's nodes (2), is prepared again.
 */
export const readyValue = (firewall: boolean): string => (firewall ? 'firewall-2' : 'true');

/**
 * The network swarm instances run on: one bridge on each node with its inter-container switch off (as the
 * docker driver's instance bridge), so an instance reaches the outside and its node's edge, and neither
 * another instance nor any of our services (those are on the platform's overlay). A fresh overlay per
 * instance did the same but cost ~0.45 s of every create on its node (bench/swarm: the network's VXLAN set up
 * before the container could start), and a move's copy needs no network of the instance's.
 *
 * The swarm makes a bridge network on a node from a swarm-scoped network whose settings come from a
 * "config-only" network that must exist on that node, and a manager's Engine API cannot make that one there.
 * So, as for volume removals, a one-shot job on the node makes it through the node's engine, once per node:
 * the node then carries a label saying so. A node joined later gets it before its first instance.
 *
 * The same job installs the node's host firewall for the bridge (FIREWALL=enforce, node-setup.ts): the switch
 * being off keeps instances apart, but the node's own addresses (every port published in host mode there, the
 * platform's included) and the private network around it are otherwise reachable from every instance on it.
 */
export class SwarmInstanceNetwork {
  readonly name: string;
  private swarmNetwork: Promise<void> | undefined;
  private readonly nodes = new Map<string, Promise<void>>();
  private readonly repaired = new Map<string, number>();
  private bridge: string | undefined;
  private readonly deps: {
    engine: DockerEngine;
    scope: string;
    jobImage: string;
    log: Logger;
    /**
     * The host firewall each node gets (FIREWALL=enforce): the port instances reach the edge at, and the instance ports
     * (PORT_RANGE_START..END), both kept to the swarm's nodes. Absent: none.
     */
    firewall?: { gatewayPort: number; instancePorts: [number, number] };
  };

  constructor(deps: SwarmInstanceNetwork['deps']) {
    this.deps = deps;
    this.name = instanceNetworkName(deps.scope);
  }

  /** The network exists in the swarm and on `node`; made when missing. */
  ensure(node: string): Promise<void> {
    return this.onNode(node, false);
  }

  /** Prepare the node again whatever its label says (a node that came back may have lost its firewall rules). */
  prepare(node: string): Promise<void> {
    return this.onNode(node, true);
  }

  /**
   * Prepare the node again because its tasks say it lost the config-only network, at most once per REPAIR_MS: every
   * task refused meanwhile says the same, and the job takes seconds. Returns `result` at once.
   */
  repair<T>(node: string, log: Logger, result: T): T {
    const last = this.repaired.get(node) ?? 0;
    if (Date.now() - last < REPAIR_MS) return result;
    this.repaired.set(node, Date.now());
    log.warn({ node }, 'the node lost its instance network (an engine started with an empty network store): preparing it again');
    void this.prepare(node).catch((err: unknown) => log.warn({ err, node }, 'could not prepare the node again'));
    return result;
  }

  private async onNode(node: string, again: boolean): Promise<void> {
    this.swarmNetwork ??= this.createSwarmNetwork().catch((err) => {
      this.swarmNetwork = undefined;
      throw err;
    });
    await this.swarmNetwork;
    // Asked anew each time (the node's label: one inspect), so a label removed by hand is seen; concurrent asks share one.
    let running = this.nodes.get(node);
    if (!running) {
      running = this.ensureOnNode(node, again).finally(() => this.nodes.delete(node));
      this.nodes.set(node, running);
    }
    await running;
  }

  private async createSwarmNetwork(): Promise<void> {
    const { engine } = this.deps;
    await this.makeSwarmNetwork();
    const info = await inspectNetwork(engine, this.name);
    if (!info) throw new Error(`the swarm network ${this.name} was not found after it was made`);
    this.bridge = bridgeOf(info);
    // Not a create's concern when it fails: without the anchor a node's bridge goes with its last instance, as before.
    if (this.deps.jobImage) {
      const spec = anchorSpec({
        network: this.name,
        scope: this.deps.scope,
        image: this.deps.jobImage,
        nodeConstraint: `node.labels.${readyLabel(this.name)} == ${readyValue(this.deps.firewall !== undefined)}`,
      });
      await ensureAnchor(engine, spec).catch((err: unknown) => this.deps.log.warn({ err }, 'could not keep the instance bridge anchored on every node'));
    }
  }

  private async makeSwarmNetwork(): Promise<void> {
    const { engine } = this.deps;
    try {
      await engine.run('network create', (abortSignal) =>
        engine.docker.createNetwork(
          o({
            Name: this.name,
            Driver: 'bridge',
            Scope: 'swarm',
            ConfigFrom: { Network: configName(this.name) },
            CheckDuplicate: true,
            // No labels: the engine refuses any setting of its own on a network made from a config-only one.
            abortSignal,
          }) as never,
        ),
      );
    } catch (err) {
      if (dockerStatus(err) !== 409) throw err;
    }
  }

  private async ensureOnNode(node: string, again: boolean): Promise<void> {
    const { engine, scope, jobImage, firewall } = this.deps;
    const label = readyLabel(this.name);
    const info = await engine.run('node inspect', (abortSignal) => engine.docker.getNode(node).inspect(o({ abortSignal })));
    const labels = info.Spec?.Labels as Record<string, string> | undefined;
    const ready = readyValue(firewall !== undefined);
    // The nodes as they are now: a node that joined or left changes who may reach every node's published ports.
    const sources = firewall ? nodeSources(await engine.run('node list', (abortSignal) => engine.docker.listNodes(o({ abortSignal })))) : [];
    const digest = firewall ? sourcesDigest(sources) : undefined;
    if (labels?.[label] === ready && labels?.[sourcesLabel(this.name)] === digest && !again) return;
    if (!jobImage) throw new Error(`the instance network is not on node ${node} yet, and SWARM_JANITOR_IMAGE (the image of the job that makes it) is not set`);
    const config = {
      Name: configName(this.name),
      // The engine makes a second local network of the same name otherwise (409 instead: it is there already); every
      // new swarm and every return of a node would add one.
      CheckDuplicate: true,
      ConfigOnly: true,
      Options: { 'com.docker.network.bridge.enable_icc': 'false' },
    };
    const setup: NodeSetup = {
      network: config,
      ...(firewall
        ? {
            firewall: {
              bridge: this.bridge!,
              gatewayPort: firewall.gatewayPort,
              tag: firewallTag(this.name),
              published: { edgePort: firewall.gatewayPort, instancePorts: firewall.instancePorts, sources },
            },
          }
        : {}),
    };
    const made = await runJob(engine, {
      name: `agenthost-network-${node.slice(0, 12)}-${Date.now().toString(36)}`,
      scope,
      node,
      timeoutMs: 60_000,
      // The firewall's rules are the node's: the job runs in its network namespace, allowed to change them and nothing else.
      ...(firewall ? { networks: ['host'] } : {}),
      container: {
        Image: jobImage,
        User: '0',
        Command: ['/usr/local/bin/node', 'services/provisioner/src/swarm/node-setup.ts', JSON.stringify(setup)],
        ReadOnly: true,
        CapabilityDrop: ['ALL'],
        ...(firewall ? { CapabilityAdd: ['CAP_NET_ADMIN', 'CAP_NET_RAW'] } : {}),
        Mounts: [
          { Type: 'bind', Source: socketOf(labels), Target: '/var/run/docker.sock' },
          // iptables takes its lock under /run.
          { Type: 'tmpfs', Target: '/run' },
        ],
      },
    });
    if (!made) throw new Error(`the instance network${firewall ? ' and its firewall' : ''} could not be made on node ${node}`);
    await writeAtVersion(
      async () => {
        const n = await engine.run('node inspect', (abortSignal) => engine.docker.getNode(node).inspect(o({ abortSignal })));
        return { version: n.Version?.Index as number, spec: n.Spec as { Labels?: Record<string, string> } };
      },
      (version, spec) => engine.run('node update', () => engine.docker.getNode(node).update({ version, ...spec })),
      (spec) => ({ ...spec, Labels: { ...spec.Labels, [label]: ready, ...(digest ? { [sourcesLabel(this.name)]: digest } : {}) } }),
    );
  }
}
