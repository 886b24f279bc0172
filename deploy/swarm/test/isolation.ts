import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { apiClient, recordSecret, signIn, subscribe } from '../../../packages/testkit/src/index.ts';
import { allowedNames, type ConfiguredPart } from '../src/service-env.ts';
import { DOMAIN, EDGE_HTTPS_PORT, nodeOf } from './edge.ts';
import { waitRunning } from './explain.ts';
import { apiUrl, EDGE_PORT, manager, MANAGER, swarmChain, worker, WORKER } from './helpers.ts';

// What each task of the deployed stack holds, and who reaches the nodes' published ports: the swarm half of the
// security review's findings 2 and 9. The outsider is a third network namespace on this machine (neither node, as a
// user's machine on the internet is), routed to both nodes through this host.

const run = promisify(execFile);
const state = process.env.AGENTHOST_STATE ?? '/var/lib/agenthost';
const OUTSIDER = 'agenthost-n3';
const PARTS: ConfiguredPart[] = ['gateway', 'auth', 'billing-chain', 'provisioner', 'keyvault', 'edge'];

/** The running containers of a part on both nodes: [engine, id]. */
async function containers(part: string) {
  const f = JSON.stringify({ label: [`com.docker.swarm.service.name=agenthost-${part}`], status: ['running'] });
  return (await Promise.all([manager, worker].map(async (d) => (await d.listContainers({ filters: f })).map((c) => [d, c.Id] as const)))).flat();
}

/** Every task of each service holds only the settings its configuration reads and only its own secret files; no edge holds the CA's root key. */
async function expectOwnSettingsOnly(): Promise<void> {
  for (const part of PARTS) {
    const spec = (await manager.getService(`agenthost-${part}`).inspect()).Spec.TaskTemplate.ContainerSpec;
    const own = new Set((spec.Secrets ?? []).map((s: { File: { Name: string } }) => `/run/secrets/${s.File.Name}`));
    const tasks = await containers(part);
    expect(tasks.length, part).toBeGreaterThan(0);
    for (const [engine, id] of tasks) {
      // The image's own (PATH, NODE_VERSION...) are not the stack's: only the names the spec gave are checked.
      const given = new Set((spec.Env as string[]).map((e) => e.split('=')[0]));
      const env = ((await engine.getContainer(id).inspect()).Config.Env as string[]).filter((e) => given.has(e.split('=')[0]!));
      expect(
        env.map((e) => e.split('=')[0]!).filter((n) => !allowedNames(part).has(n)),
        part,
      ).toEqual([]);
      expect(
        env.map((e) => e.slice(e.indexOf('=') + 1)).filter((v) => v.startsWith('/run/secrets/') && !own.has(v)),
        part,
      ).toEqual([]);
    }
  }
  // The operator's file (helpers.ts) sets the provisioner's PORT_RANGE_START: only the provisioner has it.
  const holders = await Promise.all(
    PARTS.map(async (p) => [p, (await manager.getService(`agenthost-${p}`).inspect()).Spec.TaskTemplate.ContainerSpec.Env] as const),
  );
  expect(holders.filter(([, env]) => (env as string[]).some((e) => e.startsWith('PORT_RANGE_START='))).map(([p]) => p)).toEqual(['provisioner']);
  const rootKey = readFileSync(path.join(state, 'swarm', 'edge-ca.key'), 'utf8').trim();
  for (const [engine, id] of await containers('edge')) {
    const exec = await engine.getContainer(id).exec({ Cmd: ['sh', '-c', 'cat /run/secrets/*'], AttachStdout: true, AttachStderr: true });
    const out: Buffer[] = [];
    for await (const chunk of await exec.start({})) out.push(chunk as Buffer);
    const held = Buffer.concat(out).toString();
    expect(held).toContain('PRIVATE KEY');
    expect(held.includes(rootKey.split('\n').slice(1, -1).join('\n'))).toBe(false);
  }
}

/** A network namespace that is neither node: 10.99.3.2, routed through this host (which forwards to the worker). */
async function outsider(): Promise<void> {
  const sh = (cmd: string) => run('bash', ['-c', cmd]);
  await sh(`[ -e /run/netns/${OUTSIDER} ] || ip netns add ${OUTSIDER}`);
  await sh('ip link show ah-n3 >/dev/null 2>&1 || { ip link add ah-n3 type veth peer name ah-n3-in && ip link set ah-n3-in netns agenthost-n3; }');
  await sh('ip addr replace 10.99.3.1/24 dev ah-n3 && ip link set ah-n3 up');
  await sh(
    `ip -n ${OUTSIDER} addr replace 10.99.3.2/24 dev ah-n3-in && ip -n ${OUTSIDER} link set ah-n3-in up && ip -n ${OUTSIDER} route replace default via 10.99.3.1`,
  );
  // No FORWARD rule of its own: an ACCEPT ahead of DOCKER-USER would let it past the very rules under test. To the worker
  // it passes two-node.sh's rules for that link; to this host's published ports, Docker's own.
}

/** Whether the outsider opens a TCP connection to ip:port (3 s to answer). */
async function outsiderConnects(ip: string, port: number): Promise<boolean> {
  const { stdout } = await run('ip', [
    'netns',
    'exec',
    OUTSIDER,
    'bash',
    '-c',
    `timeout 3 bash -c 'exec 3<>/dev/tcp/${ip}/${port}' && echo open || echo closed`,
  ]);
  return stdout.includes('open');
}

/** The outsider's HTTPS request to the API through a node's edge, trusting the deployment's root: its status. */
async function outsiderHttps(node: string): Promise<string> {
  const ca = path.join(state, 'swarm', 'edge-ca.crt');
  const url = `https://${DOMAIN}:${EDGE_HTTPS_PORT}/api/health/live`;
  const args = [
    'curl',
    '-sS',
    '-o',
    '/dev/null',
    '-w',
    '%{http_code}',
    '--max-time',
    '10',
    '--cacert',
    ca,
    '--resolve',
    `${DOMAIN}:${EDGE_HTTPS_PORT}:${node}`,
    url,
  ];
  return (await run('ip', ['netns', 'exec', OUTSIDER, ...args])).stdout;
}

/**
 * With an instance running on the worker: the outsider reaches neither node's edge instance port nor the instance's
 * port, and gets the API over HTTPS through either node; this host (the manager node, as an edge) still reaches both.
 */
async function expectOnlyNodesReachInstancePorts(): Promise<void> {
  await outsider();
  const session = await signIn(apiClient(apiUrl()));
  await subscribe({ chain: swarmChain }, session, { tier: 'pro' });
  const ids: string[] = [];
  try {
    // Placement picks the roomiest node: create until one lands on the worker (at most the tier's limit).
    let port = 0;
    for (let i = 0; i < 5 && !port; i++) {
      const r = await session.api.post('/instance/create', { framework: 'openclaw' });
      expect(r.status, r.text).toBe(200);
      recordSecret(r.body.access_token);
      ids.push(r.body.instance_id);
      const view = await waitRunning(session.api, r.body.instance_id);
      // Its port, published in host mode on its node (the edges reach it there).
      if ((await nodeOf(view.instance_id)) === WORKER)
        port = (await manager.getService(`agenthost-${view.instance_id}`).inspect()).Spec.EndpointSpec?.Ports?.[0]?.PublishedPort ?? 0;
    }
    expect(port).toBeGreaterThan(0);
    const fromOutside = [outsiderConnects(WORKER, EDGE_PORT), outsiderConnects(MANAGER, EDGE_PORT), outsiderConnects(WORKER, port)];
    expect(await Promise.all(fromOutside)).toEqual([false, false, false]);
    expect(await Promise.all([outsiderHttps(WORKER), outsiderHttps(MANAGER)])).toEqual(['200', '200']);
    const fromNode = await run('bash', [
      '-c',
      `timeout 3 bash -c 'exec 3<>/dev/tcp/${WORKER}/${port}' && timeout 3 bash -c 'exec 3<>/dev/tcp/${WORKER}/${EDGE_PORT}' && echo open`,
    ]);
    expect(fromNode.stdout).toContain('open');
  } finally {
    for (const id of ids) await session.api.del(`/instance/delete/${id}`).catch(() => {});
  }
}

/** Both: what each task holds, then who reaches the published ports. */
export async function expectIsolated(): Promise<void> {
  await expectOwnSettingsOnly();
  await expectOnlyNodesReachInstancePorts();
}
