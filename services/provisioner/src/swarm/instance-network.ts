import { writeAtVersion } from '@agenthost/shared';
import { dockerStatus, o, type DockerEngine } from '../docker/engine.ts';
import { runJob, socketOf } from './janitor.ts';

/** Apart from the docker driver's bridge of the same scope (`INSTANCE_NETWORK`), which a manager's engine may also run. */
export const instanceNetworkName = (scope: string): string => `${scope}-swarm`;
const configName = (name: string) => `${name}-config`;
const readyLabel = (name: string) => `agenthost.network.${name}`;

const SCRIPT = `
const http = require('node:http');
const body = process.argv[1];
const req = http.request({ socketPath: '/var/run/docker.sock', method: 'POST', path: '/networks/create', headers: { 'content-type': 'application/json' } }, (r) => {
  r.resume();
  r.on('end', () => process.exit(r.statusCode === 201 || r.statusCode === 409 ? 0 : 1));
});
req.on('error', () => process.exit(1));
req.end(body);
`;

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
 */
export class SwarmInstanceNetwork {
  readonly name: string;
  private swarmNetwork: Promise<void> | undefined;
  private readonly nodes = new Map<string, Promise<void>>();
  private readonly d: { engine: DockerEngine; scope: string; jobImage: string };

  constructor(deps: SwarmInstanceNetwork['d']) {
    this.d = deps;
    this.name = instanceNetworkName(deps.scope);
  }

  /** The network exists in the swarm and on `node`; made when missing. */
  async ensure(node: string): Promise<void> {
    this.swarmNetwork ??= this.createSwarmNetwork().catch((err) => {
      this.swarmNetwork = undefined;
      throw err;
    });
    await this.swarmNetwork;
    // Asked anew each time (the node's label: one inspect), so a label removed by hand is seen; concurrent asks share one.
    let onNode = this.nodes.get(node);
    if (!onNode) {
      onNode = this.ensureOnNode(node).finally(() => this.nodes.delete(node));
      this.nodes.set(node, onNode);
    }
    await onNode;
  }

  private async createSwarmNetwork(): Promise<void> {
    const { engine } = this.d;
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

  private async ensureOnNode(node: string): Promise<void> {
    const { engine, scope, jobImage } = this.d;
    const label = readyLabel(this.name);
    const info = await engine.run('node inspect', (abortSignal) => engine.docker.getNode(node).inspect(o({ abortSignal })));
    const labels = info.Spec?.Labels as Record<string, string> | undefined;
    if (labels?.[label] === 'true') return;
    if (!jobImage) throw new Error(`the instance network is not on node ${node} yet, and SWARM_JANITOR_IMAGE (the image of the job that makes it) is not set`);
    const config = {
      Name: configName(this.name),
      ConfigOnly: true,
      Options: { 'com.docker.network.bridge.enable_icc': 'false' },
    };
    const made = await runJob(engine, {
      name: `agenthost-network-${node.slice(0, 12)}-${Date.now().toString(36)}`,
      scope,
      node,
      timeoutMs: 60_000,
      container: {
        Image: jobImage,
        User: '0',
        Command: ['/usr/local/bin/node', '-e', SCRIPT, JSON.stringify(config)],
        ReadOnly: true,
        CapabilityDrop: ['ALL'],
        Mounts: [{ Type: 'bind', Source: socketOf(labels), Target: '/var/run/docker.sock' }],
      },
    });
    if (!made) throw new Error(`the instance network could not be made on node ${node}`);
    await writeAtVersion(
      async () => {
        const n = await engine.run('node inspect', (abortSignal) => engine.docker.getNode(node).inspect(o({ abortSignal })));
        return { version: n.Version?.Index as number, spec: n.Spec as { Labels?: Record<string, string> } };
      },
      (version, spec) => engine.run('node update', () => engine.docker.getNode(node).update({ version, ...spec })),
      (spec) => ({ ...spec, Labels: { ...spec.Labels, [label]: 'true' } }),
    );
  }
}
