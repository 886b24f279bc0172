import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { expect } from 'vitest';
import { DEFAULT_CONFIG } from '@agenthost/devchain';
import { apiClient, recordSecret, repoRoot, testLogDir, waitFor, type StackChain } from '../../../packages/testkit/src/index.ts';

// The two-node swarm of deploy/swarm/two-node.sh (this engine the manager at 10.99.0.1, a second engine in
// the network namespace agenthost-n2 at 10.99.0.2) with the stack deployed by deploy/swarm/src/cli.ts.

const run = promisify(execFile);
export const MANAGER = '10.99.0.1';
export const WORKER = '10.99.0.2';
export const EDGE_PORT = 18480;
export const DEVCHAIN_PORT = 18899;
export const manager = new Docker({ socketPath: '/var/run/docker.sock' });
export const worker = new Docker({ socketPath: '/run/agenthost-node2/docker.sock' });
export const apiUrl = (host = MANAGER) => `http://${host}:${EDGE_PORT}/api`;

const sh = (script: string, args: string[], env: NodeJS.ProcessEnv = {}, timeout = 900_000) =>
  run('bash', [path.join(repoRoot, script), ...args], { env: { ...process.env, ...env }, timeout, maxBuffer: 64 * 1024 * 1024 });

/** Two nodes, the images on both, the stack up (idempotent: a stack already there is updated in place). */
export async function deployStack(state: string, replicas: string[] = []): Promise<void> {
  mkdirSync(state, { recursive: true });
  await sh('deploy/swarm/two-node.sh', ['up']);
  await sh('deploy/images/build.sh', ['platform']);
  // The real OpenClaw image stays on the manager: these tests run the stand-in agent.
  await sh('deploy/swarm/two-node.sh', ['load'], { SKIP_IMAGES: 'openclaw' });
  const envFile = path.join(state, 'swarm-test.env');
  // Instance ports of their own: the single-host suites, run beside this one, publish 18100-18649 on this machine.
  writeFileSync(envFile, 'FRAMEWORK_IMAGES={"openclaw":"agenthost/standin"}\nPORT_RANGE_START=19000\nPORT_RANGE_END=19199\n');
  await run(process.execPath, [path.join(repoRoot, 'deploy/swarm/src/cli.ts'), 'up', ...replicas], {
    env: {
      ...process.env,
      AGENTHOST_STATE: state,
      // The edge's ports: HTTPS and HTTP for users, EDGE_PORT the instances' own (the API tests call there too).
      EDGE_PORT: String(EDGE_PORT),
      EDGE_HTTPS_PORT: '18443',
      EDGE_HTTP_PORT: '18482',
      DEVCHAIN_PORT: String(DEVCHAIN_PORT),
      AGENTHOST_ENV_FILE: envFile,
    },
    timeout: 900_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  // Every secret of the deployment goes to the log scan: none may appear in any service's log.
  const dir = path.join(state, 'swarm');
  for (const f of readdirSync(dir))
    if (!f.endsWith('.conf') && f !== 'nats') for (const line of readFileSync(path.join(dir, f), 'utf8').split('\n')) recordSecret(line.trim());
  for (const f of readdirSync(path.join(dir, 'nats'))) if (f.endsWith('.nk')) recordSecret(readFileSync(path.join(dir, 'nats', f), 'utf8').trim());
}

/** `cli.ts rebalance` as an operator runs it after a node came back: resolves once the moved services converged. */
export async function rebalanceStack(): Promise<void> {
  await run(process.execPath, [path.join(repoRoot, 'deploy/swarm/src/cli.ts'), 'rebalance'], { timeout: 600_000, maxBuffer: 16 * 1024 * 1024 });
}

/** `cli.ts drain <node>` or `cli.ts activate <node>` as an operator runs them; resolves when the command is done. */
export async function nodeCommand(cmd: 'drain' | 'activate', node: string): Promise<void> {
  // The drain gives up well inside the test's own bound, so that a move that does not happen fails with the CLI's
  // words and the provisioners' account of the moves, not with a test timeout that says nothing.
  const env = { ...process.env, DRAIN_TIMEOUT_SECONDS: '420' };
  await run(process.execPath, [path.join(repoRoot, 'deploy/swarm/src/cli.ts'), cmd, node], { env, timeout: 480_000, maxBuffer: 16 * 1024 * 1024 }).catch(
    async (err: Error & { stderr?: string }) => {
      const logs = await run('docker', ['service', 'logs', '--raw', '--tail', '400', 'agenthost-provisioner'], { maxBuffer: 64 * 1024 * 1024, timeout: 30_000 })
        .then((o) => `${o.stdout}${o.stderr}`)
        .catch(() => '');
      const moves = logs.split('\n').filter((l) => /draining|moving|moved|volume|copy|job/i.test(l));
      throw new Error(`${cmd} ${node} failed: ${err.stderr || err.message}\nthe provisioners on the moves:\n${moves.slice(-30).join('\n')}`);
    },
  );
}

/** deploy/swarm/two-node.sh (up, load, stop-worker, start-worker). */
export async function twoNode(cmd: string): Promise<void> {
  await sh('deploy/swarm/two-node.sh', [cmd], {}, 300_000);
}

/** deploy/swarm/scale.sh as an operator runs it; resolves once the new count runs (healthy). */
export async function scale(...counts: string[]): Promise<void> {
  await sh('deploy/swarm/scale.sh', counts, {}, 300_000);
}

/** Instance services left by an earlier, interrupted run on this machine (their rows fail on the next reconcile). */
export async function removeStrayInstances(): Promise<void> {
  // A new machine is no swarm manager yet (deployStack makes it one): nothing is left over then.
  if ((await manager.info()).Swarm?.LocalNodeState !== 'active') return;
  for (const s of await manager.listServices({ filters: JSON.stringify({ label: ['agenthost.instance'] }) }))
    await manager
      .getService(s.ID)
      .remove()
      .catch(() => {});
}

/** The stack's devchain as the testkit's subscribe() wants it (wallets reach it on the manager). */
export const swarmChain: StackChain = {
  url: `http://${MANAGER}:${DEVCHAIN_PORT}`,
  programId: DEFAULT_CONFIG.programId,
  treasury: DEFAULT_CONFIG.treasury,
  prices: { ...DEFAULT_CONFIG.prices },
  advanceClock: () => Promise.reject(new Error('the swarm devchain clock is not driven by these tests')),
  now: () => Promise.reject(new Error('not used')),
  close: async () => {},
};

/** Every service log of the stack into the test log directory (the scan reads them). */
export async function saveServiceLogs(): Promise<void> {
  const dir = path.join(testLogDir, 'swarm');
  mkdirSync(dir, { recursive: true });
  const services = await manager.listServices({ filters: JSON.stringify({ label: ['agenthost.stack=agenthost'] }) });
  await Promise.all(
    services.map(async (s) => {
      const name = s.Spec?.Name ?? s.ID;
      // Bounded: the log broker can wait long on a task whose node went away.
      const out = await run('docker', ['service', 'logs', '--raw', '--no-trunc', '--tail', '20000', name], {
        maxBuffer: 64 * 1024 * 1024,
        timeout: 30_000,
      }).catch((e: { stdout?: string; stderr?: string }) => ({ stdout: e.stdout ?? '', stderr: e.stderr ?? '' }));
      writeFileSync(path.join(dir, `${name}.log`), `${out.stdout}${out.stderr}`);
    }),
  );
}

/** Running tasks of a service, with the node each runs on. */
export async function runningTasks(service: string): Promise<{ node: string }[]> {
  const tasks = await manager.listTasks({ filters: JSON.stringify({ service: [service], 'desired-state': ['running'] }) });
  return tasks.filter((t) => t.Status?.State === 'running').map((t) => ({ node: t.NodeID! }));
}

/** SIGKILL one running task container of a service, on whichever node it runs; resolves once the swarm has replaced it. */
export async function killOne(service: string): Promise<void> {
  const before = (await runningTasks(service)).length;
  for (const d of [manager, worker]) {
    const [c] = await d.listContainers({ filters: JSON.stringify({ label: [`com.docker.swarm.service.name=${service}`], status: ['running'] }) });
    if (c) {
      await d.getContainer(c.Id).kill({ signal: 'SIGKILL' });
      break;
    }
  }
  await waitFor(`${service} replaced`, async () => (await runningTasks(service)).length === before, 120_000, 500);
}

/** Swarm objects still labelled with an instance id (services, networks, secrets) and its volume on either node. */
export async function leftovers(instanceId: string): Promise<string[]> {
  const f = JSON.stringify({ label: [`agenthost.instance=${instanceId}`] });
  const out: string[] = [];
  for (const s of await manager.listServices({ filters: f })) out.push(`service ${s.Spec?.Name}`);
  for (const n of await manager.listNetworks({ filters: f })) out.push(`network ${n.Name}`);
  for (const s of await manager.listSecrets({ filters: f })) out.push(`secret ${s.Spec?.Name}`);
  for (const [name, d] of [
    ['manager', manager],
    ['worker', worker],
  ] as const) {
    for (const v of (await d.listVolumes()).Volumes ?? []) if (v.Name.includes(instanceId)) out.push(`volume ${v.Name} on ${name}`);
  }
  return out;
}

export const SCALED = { gateway: 2, auth: 2, 'billing-chain': 1, provisioner: 2, keyvault: 2 } as const;

/** Every scaled service runs its count; those with replicas to spare and no placement rule (the provisioner runs on managers) on both nodes. */
export async function expectSpread(): Promise<void> {
  for (const [svc, n] of Object.entries(SCALED)) {
    const tasks = await runningTasks(`agenthost-${svc}`);
    expect(tasks, svc).toHaveLength(n);
    if (n > 1 && svc !== 'provisioner') expect(new Set(tasks.map((t) => t.node)).size, svc).toBe(2);
  }
}

type Api = ReturnType<typeof apiClient>;

/** The instance's view when its status is `want`, else undefined: one answer, so the view asserted on is the one that had it. */
export async function statusIs(api: Api, id: string, want: string): Promise<any> {
  const r = await api.get(`/instance/status/${id}`);
  return r.status === 200 && r.body.status === want ? r.body : undefined;
}

/**
 * The user's count of requests settles at the requests that were answered, killed gateways included: a killed
 * gateway's unused quota goes back after USAGE_LEASE_TTL_SECONDS (10 s), live ones give theirs back after
 * USAGE_IDLE_RETURN_MS (5 s) idle, so the checks are 6 s apart (each counts itself).
 */
export async function expectUsageExact(token: string, ok: number, failed: number, clients: number): Promise<void> {
  const counted = await usageCounted(token, ok, ok + failed + clients);
  expect(counted).toBeGreaterThanOrEqual(ok);
  // Known: a GET in flight on the killed gateway, already counted there, can be replayed to another gateway by
  // the edge's HTTP client (Go replays idempotent requests on a dropped keep-alive connection): at most one per
  // client connection. Tracked in the README.
  expect(counted).toBeLessThanOrEqual(ok + failed + clients);
}

/**
 * The requests counted today for the token's user once the count has settled within [`least`, `most`]: a dead
 * gateway's leased block is taken back only after its lease expires, so the count can trail the answers for a
 * while. The reads made here are taken off, since each counts itself. Throws with the last count if it never does.
 */
export async function usageCounted(token: string, least: number, most: number): Promise<number> {
  const api = apiClient(apiUrl(), token);
  let seen = 0;
  let checks = 0;
  return waitFor(
    'the count to settle',
    async () => {
      const r = await api.get('/subscription/status');
      checks++;
      seen = (r.body.requests_today as number) - checks;
      return seen >= least && seen <= most ? seen : undefined;
    },
    120_000,
    3000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}: counted ${seen}, expected ${least} to ${most}`);
  });
}

/**
 * `clients` clients, each sending GET `path` one after another (odd ones through the worker's edge unless
 * managerOnly), counting the answered and the failed; `seen` gets each answer's body. end() stops and tallies.
 */
export function steadyLoad(token: string, clients: number, path: string, seen?: (body: any) => void, pauseMs = 0) {
  let stop = false;
  const failures: string[] = [];
  const load = { ok: 0, failures, managerOnly: false, end: async () => ((stop = true), await running, { ok: load.ok, failures }) };
  const running = Promise.all(
    Array.from({ length: clients }, async (_, i) => {
      const [viaManager, viaWorker] = [MANAGER, WORKER].map((h) => apiClient(apiUrl(h), token));
      while (!stop) {
        const r = await (i % 2 && !load.managerOnly ? viaWorker! : viaManager!)
          .get(path)
          .catch((e: Error) => ({ status: 0, text: e.message, body: undefined }));
        if (r.status === 200) load.ok++, seen?.(r.body);
        else failures.push(`${r.status} ${r.text.slice(0, 160)}`);
        if (pauseMs) await new Promise((res) => setTimeout(res, pauseMs));
      }
    }),
  );
  return load;
}

/** A provisioner replica's /metrics (its operator port on the overlay, read from inside its container on the manager). */
export async function provisionerMetrics(): Promise<string> {
  const [c] = await manager.listContainers({
    filters: JSON.stringify({ label: ['com.docker.swarm.service.name=agenthost-provisioner'], status: ['running'] }),
  });
  if (!c) throw new Error('no provisioner running on the manager');
  const { stdout } = await run(
    'docker',
    ['exec', c.Id, '/usr/local/bin/node', '-e', "fetch('http://127.0.0.1:9464/metrics').then((r) => r.text()).then((t) => process.stdout.write(t))"],
    { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
  );
  return stdout;
}

/** A gauge's value per `node` label from a metrics page. */
export const perNode = (page: string, metric: string): Record<string, number> =>
  Object.fromEntries([...page.matchAll(new RegExp(`^${metric}\\{node="([^"]+)"[^}]*\\} (\\S+)$`, 'gm'))].map((m) => [m[1]!, Number(m[2])]));
