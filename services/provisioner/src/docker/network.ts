import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import type { DockerEngine } from './engine.ts';
import { dockerStatus, o } from './call.ts';
import { LABEL_MANAGED, LABEL_SCOPE } from './spec.ts';

export interface InstanceNetwork {
  name: string;
  id: string;
  /** Linux bridge interface (matched by the firewall rules). */
  bridge: string;
  /** Address of the host on the bridge: where instances reach the gateway. */
  gatewayIp: string;
  subnet: string;
}

const ICC = 'com.docker.network.bridge.enable_icc';
const BRIDGE_NAME = 'com.docker.network.bridge.name';

/** A stable interface name (max 15 chars) derived from the network name. */
export const bridgeNameFor = (network: string): string => `ah-${createHash('sha256').update(network).digest('hex').slice(0, 11)}`;

/**
 * Find or create the instance network: a bridge with inter-container communication disabled, so an
 * instance cannot reach another one on it. An existing network with ICC enabled is refused.
 */
export async function ensureNetwork(engine: DockerEngine, name: string, scope: string): Promise<InstanceNetwork> {
  let info = await inspectNetwork(engine, name);
  if (!info) {
    try {
      await engine.run('network create', (abortSignal) =>
        engine.docker.createNetwork({
          Name: name,
          Driver: 'bridge',
          CheckDuplicate: true,
          Labels: { [LABEL_MANAGED]: 'true', [LABEL_SCOPE]: scope },
          Options: { [ICC]: 'false', [BRIDGE_NAME]: bridgeNameFor(name), 'com.docker.network.bridge.enable_ip_masquerade': 'true' },
          abortSignal,
        } as Docker.NetworkCreateOptions),
      );
    } catch (err) {
      if (dockerStatus(err) !== 409) throw err; // 409: another replica created it first
    }
    await dedupe(engine, name);
    info = await inspectNetwork(engine, name);
    if (!info) throw new Error(`network ${name} could not be created`);
  }
  if (info.Driver !== 'bridge') throw new Error(`network ${name} exists but is not a bridge`);
  if (info.Options?.[ICC] !== 'false')
    throw new Error(`network ${name} exists with inter-container communication enabled; remove it or choose another INSTANCE_NETWORK`);
  const ipam = (info.IPAM?.Config ?? []).find((c) => c.Subnet && !c.Subnet.includes(':'));
  if (!ipam?.Subnet) throw new Error(`network ${name} has no IPv4 subnet`);
  const gatewayIp = ipam.Gateway ?? firstHost(ipam.Subnet);
  return { name, id: info.Id, bridge: bridgeOf(info), gatewayIp, subnet: ipam.Subnet };
}

/** A bridge network's interface on the host: the name it was given, or Docker's br-<first 12 of its id> (a swarm-scoped one's id is the same on every node). */
export const bridgeOf = (info: { Id: string; Options?: Record<string, string> }): string => info.Options?.[BRIDGE_NAME] ?? `br-${info.Id.slice(0, 12)}`;

export async function inspectNetwork(engine: DockerEngine, name: string): Promise<Docker.NetworkInspectInfo | undefined> {
  try {
    const info = (await engine.run('network inspect', (abortSignal) =>
      (engine.docker.getNetwork(name) as unknown as { inspect(opts: object): Promise<Docker.NetworkInspectInfo> }).inspect(o({ abortSignal })),
    )) as Docker.NetworkInspectInfo;
    // Docker matches ids by prefix too: make sure it is the network with that exact name.
    return info.Name === name ? info : undefined;
  } catch (err) {
    if (dockerStatus(err) === 404) return undefined;
    throw err;
  }
}

/** Docker can create two networks with one name under a race: keep the oldest, remove the others. */
async function dedupe(engine: DockerEngine, name: string): Promise<void> {
  const list = await engine.run('network list', (abortSignal) => engine.docker.listNetworks(o({ filters: { name: [name] }, abortSignal })));
  const same = list.filter((n) => n.Name === name).sort((a, b) => (a.Created ?? '').localeCompare(b.Created ?? '') || a.Id.localeCompare(b.Id));
  for (const extra of same.slice(1)) {
    await engine.run('network remove', (abortSignal) => engine.docker.getNetwork(extra.Id).remove({ abortSignal })).catch(() => {});
  }
}

function firstHost(subnet: string): string {
  const [addr] = subnet.split('/');
  const parts = addr!.split('.').map(Number);
  parts[3] = (parts[3] ?? 0) + 1;
  return parts.join('.');
}
