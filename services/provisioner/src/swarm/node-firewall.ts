import { createHash } from 'node:crypto';
import { nodeAddr } from './placement.ts';

/*
 * Who may reach a swarm node's published ports that are not for users: the edge's instance port (EDGE_PORT: the whole
 * API, plain HTTP, the routes only instances call included) and the instance ports (each agent, unauthenticated but
 * for its token). The swarm publishes them in host mode on every node; a connection from outside to such a port is
 * DNATed to the container and forwarded, so the host's INPUT chain never sees it: only Docker's DOCKER-USER hook does.
 * There, for connections whose original destination port is one of them, the swarm's nodes pass (an edge reaches the
 * instances of every node from its node's address; the provisioner probes them the same way) and every other source
 * is dropped. Not affected: the node's own traffic to them (its instances reach its edge, its edge its instances, by
 * local delivery through Docker's proxy, which the instance bridge's INPUT rules govern: docker/firewall.ts), and the
 * users' HTTPS and HTTP ports, which stay open to everyone.
 */

export interface PublishedPorts {
  /** The edge's instance port (INSTANCE_GATEWAY_URL's). */
  edgePort: number;
  /** PORT_RANGE_START..PORT_RANGE_END: every instance's published port. */
  instancePorts: [number, number];
  /** The IPv4 addresses the swarm's nodes connect from. */
  sources: string[];
}

/** The DOCKER-USER rules, in order: per port, the nodes' addresses return to Docker's own rules, anything else is dropped. */
export function publishedPortRules(p: PublishedPorts, tag: string): { chain: string; rule: string[] }[] {
  const c = ['-m', 'comment', '--comment', tag];
  return [String(p.edgePort), `${p.instancePorts[0]}:${p.instancePorts[1]}`].flatMap((port) => {
    // DNAT and ORIGINAL: a connection from outside to a published port, in its first direction (a reply is not matched,
    // nor is an instance's own connection out to some server's port of the same number).
    const match = ['-p', 'tcp', '-m', 'conntrack', '--ctstate', 'DNAT', '--ctorigdstport', port, '--ctdir', 'ORIGINAL'];
    return [
      ...p.sources.map((src) => ({ chain: 'DOCKER-USER', rule: ['-s', `${src}/32`, ...match, ...c, '-j', 'RETURN'] })),
      { chain: 'DOCKER-USER', rule: [...match, ...c, '-j', 'DROP'] },
    ];
  });
}

type SwarmNode = Parameters<typeof nodeAddr>[0];

/** Every address a node may connect from: its address for instances, its advertise address, a manager's own. */
export function nodeSources(nodes: SwarmNode[]): string[] {
  const all = nodes.flatMap((n) => [nodeAddr(n), n.Status?.Addr ?? '', (n.ManagerStatus?.Addr ?? '').replace(/:\d+$/, '')]);
  return [...new Set(all.filter((a) => /^\d{1,3}(\.\d{1,3}){3}$/.test(a) && a !== '0.0.0.0' && !a.startsWith('127.')))].sort();
}

/** A short digest of the sources, kept in a node label: a node prepared for another set of nodes is prepared again. */
export const sourcesDigest = (sources: string[]): string => createHash('sha256').update(sources.join(',')).digest('hex').slice(0, 16);
