import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { nodeAddr } from '../../../services/provisioner/src/swarm/placement.ts';
import { manager, MANAGER } from './helpers.ts';

// The swarm's HTTPS edge as a user's client meets it: every name under the domain resolves to a node (here the test
// picks which, as DNS would pick one), and the client trusts the deployment's one CA.

export const EDGE_HTTPS_PORT = 18443;
export const EDGE_HTTP_PORT = 18482;
export const DOMAIN = 'agenthost.localhost';
export const edgeOrigin = `https://${DOMAIN}:${EDGE_HTTPS_PORT}`;

const state = process.env.AGENTHOST_STATE ?? '/var/lib/agenthost';
/** The root every node's edge issues under (deploy keeps it in $AGENTHOST_STATE/swarm). */
export const edgeCa = () => readFileSync(path.join(state, 'swarm', 'edge-ca.crt'), 'utf8');

export interface EdgeAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

/** One HTTPS request to `url` through the edge of the node at `node` (TLS checked against the swarm's CA). */
export function viaEdge(url: string, opts: { node?: string; method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<EdgeAnswer> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: opts.node ?? MANAGER,
        port: Number(u.port || 443),
        servername: u.hostname,
        path: `${u.pathname}${u.search}`,
        method: opts.method ?? 'GET',
        ca: edgeCa(),
        headers: { host: u.host, ...opts.headers },
        timeout: 30_000,
        agent: false,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} through ${opts.node ?? MANAGER} within 30 s`)));
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** The stand-in agent's own answer through the edge (its state, and the hashes of its environment on /env). */
export async function agentVia(url: string, p = '/', node = MANAGER): Promise<{ state: { born: string; boots: number }; sha256: Record<string, string> }> {
  const r = await viaEdge(`${url}${p}`, { node });
  if (r.status !== 200) throw new Error(`${url}${p} through ${node}: ${r.status} ${r.text.slice(0, 200)}`);
  return r.json;
}

/** The address of the node an instance's task runs on (as the provisioner names nodes: placement.ts nodeAddr). */
export async function nodeOf(instanceId: string): Promise<string | undefined> {
  const tasks = await manager.listTasks({ filters: JSON.stringify({ service: [`agenthost-${instanceId}`], 'desired-state': ['running'] }) });
  const nodeId = tasks.sort((a, b) => String(b.CreatedAt).localeCompare(String(a.CreatedAt)))[0]?.NodeID;
  if (!nodeId) return undefined;
  return nodeAddr((await manager.getNode(nodeId).inspect()) as Parameters<typeof nodeAddr>[0]);
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
