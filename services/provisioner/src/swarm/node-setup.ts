// The one-shot job that prepares a swarm node for instances (instance-network.ts starts it, once per node, in the
// provisioner's own image): it makes the config-only network the swarm's instance bridge takes its settings from,
// through the node's engine, and installs the node's host firewall for that bridge (docker/firewall.ts, the docker
// driver's rules: an instance reaches the node only at its edge's instance port, and no private or neighbouring
// address), and the rules that keep the node's published edge instance port and instance ports to the swarm's nodes
// (node-firewall.ts). It runs in the node's network namespace with NET_ADMIN, so the rules are the node's, and reads
// the node's own resolvers and connected subnets there.
// Usage (in the job): node services/provisioner/src/swarm/node-setup.ts '<json: NodeSetup>'
import http from 'node:http';
import { applyFirewall, applyRules, hostDnsServers, hostSubnets } from '../docker/firewall.ts';
import { type PublishedPorts, publishedPortRules } from './node-firewall.ts';

export interface NodeSetup {
  /** The config-only network's create body. */
  network: Record<string, unknown>;
  /** The bridge's rules; absent with FIREWALL=off. */
  firewall?: { bridge: string; gatewayPort: number; tag: string; published: PublishedPorts };
}

/** POST /networks/create on the node's engine: made, or there already (409). */
function createNetwork(body: Record<string, unknown>): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.request(
      { socketPath: '/var/run/docker.sock', method: 'POST', path: '/networks/create', headers: { 'content-type': 'application/json' } },
      (r) => {
        r.resume();
        r.on('end', () => resolve(r.statusCode === 201 || r.statusCode === 409));
      },
    );
    req.on('error', () => resolve(false));
    req.end(JSON.stringify(body));
  });
}

const setup = JSON.parse(process.argv[2] ?? '{}') as NodeSetup;
if (!(await createNetwork(setup.network))) {
  process.stderr.write('the config-only network could not be made\n');
  process.exit(1);
}
if (setup.firewall) {
  try {
    const { published, ...bridge } = setup.firewall;
    const changed = await applyFirewall({ ...bridge, dnsServers: hostDnsServers(), hostSubnets: hostSubnets() });
    const ports = await applyRules(publishedPortRules(published, bridge.tag));
    process.stdout.write(`${JSON.stringify({ firewall: changed || ports ? 'installed' : 'in place', bridge: setup.firewall.bridge })}\n`);
  } catch (err) {
    process.stderr.write(`the host firewall could not be installed: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
process.exit(0);
