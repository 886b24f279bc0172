import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { nodeAddr, type SwarmNodeAddresses } from '@agenthost/shared';
import { requestVia } from '../../../packages/testkit/src/edge.ts';
import { EDGE_PORT, manager, MANAGER, worker, WORKER } from './helpers.ts';

// The swarm's HTTPS edge as a user's client meets it: every name under the domain resolves to a node (here the test
// picks which, as DNS would pick one), and the client trusts the deployment's one CA.

export const EDGE_HTTPS_PORT = 18443;
export const EDGE_HTTP_PORT = 18482;
export const DOMAIN = 'agenthost.localhost';
export const edgeOrigin = `https://${DOMAIN}:${EDGE_HTTPS_PORT}`;

const state = process.env.AGENTHOST_STATE ?? '/var/lib/agenthost';
/** The root every node's edge issues under (deploy keeps it in $AGENTHOST_STATE/swarm). */
export const edgeCa = () => readFileSync(path.join(state, 'swarm', 'edge-ca.crt'), 'utf8');

/** One HTTPS request to `url` through the edge of the node at `node` (TLS checked against the swarm's CA). */
export const viaEdge = (url: string, opts: { node?: string; method?: string; headers?: Record<string, string>; body?: string } = {}) =>
  requestVia(url, { ...opts, address: opts.node ?? MANAGER, ca: edgeCa(), timeoutMs: 30_000 });

/** The stand-in agent's own answer through the edge (its state, and the hashes of its environment on /env). */
export async function agentVia(url: string, p = '/', node = MANAGER): Promise<{ state: { born: string; boots: number }; sha256: Record<string, string> }> {
  const r = await viaEdge(`${url}${p}`, { node });
  if (r.status !== 200) throw new Error(`${url}${p} through ${node}: ${r.status} ${r.text.slice(0, 200)}`);
  return r.json as Awaited<ReturnType<typeof agentVia>>;
}

/** The address of the node an instance's task runs on (as the provisioner names nodes: nodeAddr, packages/shared swarm.ts). */
export async function nodeOf(instanceId: string): Promise<string | undefined> {
  const tasks = await manager.listTasks({ filters: JSON.stringify({ service: [`agenthost-${instanceId}`], 'desired-state': ['running'] }) });
  const nodeId = tasks.sort((a, b) => String(b.CreatedAt).localeCompare(String(a.CreatedAt)))[0]?.NodeID;
  if (!nodeId) return undefined;
  return nodeAddr((await manager.getNode(nodeId).inspect()) as SwarmNodeAddresses);
}

/** A plain-HTTP GET of `url` through the edge of the node at `node`, redirects not followed: [status, Location]. */
export function plainVia(url: string, node = MANAGER): Promise<[number, string | undefined]> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.get({ host: node, port: Number(u.port || 80), path: `${u.pathname}${u.search}`, headers: { host: u.host }, timeout: 30_000 }, (res) => {
      res.resume();
      resolve([res.statusCode ?? 0, res.headers.location]);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} through ${node}`)));
    req.on('error', reject);
  });
}

/**
 * Whether the agent of instance `from` opens a TCP connection to the agent port of instance `to`, both on the node at
 * `node`, at `to`'s address on that node's instance bridge (from inside `from`'s container, as the agent would).
 */
export async function agentReaches(node: string, from: string, to: string): Promise<boolean> {
  const b = await instanceContainer(node, to);
  return agentConnects(node, from, Object.values(b.NetworkSettings.Networks)[0]!.IPAddress, 18789);
}

const instanceContainer = async (node: string, id: string) =>
  (await (node === MANAGER ? manager : worker).listContainers({ filters: JSON.stringify({ label: [`agenthost.instance=${id}`], status: ['running'] }) }))[0]!;

/** Whether the agent of instance `from`, on the node at `node`, opens a TCP connection to ip:port (3 s to answer). */
export async function agentConnects(node: string, from: string, ip: string, port: number): Promise<boolean> {
  const a = await instanceContainer(node, from);
  const exec = await (node === MANAGER ? manager : worker).getContainer(a.Id).exec({
    Cmd: ['bash', '-c', `timeout 3 bash -c 'exec 3<>/dev/tcp/${ip}/${port}' && echo open || echo closed`],
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({});
  const out: Buffer[] = [];
  for await (const chunk of stream) out.push(chunk as Buffer);
  return Buffer.concat(out).toString().includes('open');
}

/**
 * What instances reach of the nodes' own addresses (each node's firewall): from one on the worker, the worker's edge
 * instance port, its HTTPS port and the manager's instance port; from one on the manager, the manager's HTTPS port.
 */
export async function nodeReach(onWorker: string, onManager: string): Promise<boolean[]> {
  const fromWorker = [EDGE_PORT, EDGE_HTTPS_PORT].map((port) => agentConnects(WORKER, onWorker, WORKER, port));
  return Promise.all([...fromWorker, agentConnects(WORKER, onWorker, MANAGER, EDGE_PORT), agentConnects(MANAGER, onManager, MANAGER, EDGE_HTTPS_PORT)]);
}
