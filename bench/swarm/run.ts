// Benchmark on the two-node swarm of deploy/swarm (made and deployed here, as the test suite does):
//  1. authenticated req/s and gateway CPU per request with gateway ×1 against ×2 (closed loop through both
//     nodes' edges, alternating the order, same run);
//  2. create → running of stand-in instances with the swarm driver (through the API, keys fetched) against
//     the docker driver (bench/instances, the same concurrency, same run). Target: p50 within +1 s.
// Usage: node bench/swarm/run.ts   (BENCH_SECONDS=8, BENCH_CONNECTIONS=16, BENCH_CREATES=4)
// Results: bench/results/swarm.json.
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadInfraEnv } from '../../packages/testkit/src/infra-env.ts';
import { closedLoop, merge } from '../gateway/load.ts';
import { breakdown, medians, watchContainers } from './breakdown.ts';

loadInfraEnv();
const { apiClient, signIn, subscribe, waitFor } = await import('../../packages/testkit/src/index.ts');
const { apiUrl, deployStack, manager, MANAGER, removeStrayInstances, scale, swarmChain, worker, WORKER } = await import('../../deploy/swarm/test/helpers.ts');

const exec = promisify(execFile);
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const num = (name: string, def: number) => Number(process.env[name] ?? def);
const SECONDS = num('BENCH_SECONDS', 8);
const CONNECTIONS = num('BENCH_CONNECTIONS', 16);
const CREATES = num('BENCH_CREATES', 4);
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
const state = process.env.AGENTHOST_STATE ?? '/var/lib/agenthost';

/** CPU (ns) used so far by each running gateway container on both nodes, by container id. */
async function gatewayCpuNs(): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const d of [manager, worker]) {
    for (const c of await d.listContainers({ filters: JSON.stringify({ label: ['com.docker.swarm.service.name=agenthost-gateway'] }) })) {
      const s = (await d.getContainer(c.Id).stats({ stream: false })) as { cpu_stats: { cpu_usage: { total_usage: number } } };
      out.set(c.Id, s.cpu_stats.cpu_usage.total_usage);
    }
  }
  return out;
}

/** CPU used between two samples: a container that went away in between is not counted (its total went with it). */
const cpuBetween = (before: Map<string, number>, after: Map<string, number>) => [...after].reduce((sum, [id, ns]) => sum + ns - (before.get(id) ?? 0), 0);

async function gatewayRun(replicas: number, token: string) {
  await scale(`gateway=${replicas}`);
  await new Promise((r) => setTimeout(r, 3000)); // the edges see the new set of gateways
  const cpu0 = await gatewayCpuNs();
  const half = Math.max(1, CONNECTIONS / 2);
  const parts = await Promise.all(
    [MANAGER, WORKER].map((host) =>
      closedLoop({ url: `${apiUrl(host)}/subscription/status`, headers: { authorization: `Bearer ${token}` } }, half, SECONDS * 1000),
    ),
  );
  const cpu1 = await gatewayCpuNs();
  const r = merge(parts);
  return {
    replicas,
    rps: r.rps,
    errors: r.errors,
    non2xx: r.non2xx,
    p50_ms: r.latencyMs.p50,
    p99_ms: r.latencyMs.p99,
    cpu_us_per_request: Math.round(cpuBetween(cpu0, cpu1) / 1000 / Math.max(1, r.requests)),
  };
}

/** When each instance's create was called (epoch ms), for the breakdown. */
const calledAt = new Map<string, number>();

async function swarmCreates(api: ReturnType<typeof apiClient>): Promise<number[]> {
  const ms: number[] = [];
  await Promise.all(
    Array.from({ length: CREATES }, async () => {
      const t0 = performance.now();
      const epoch = Date.now();
      const r = await api.post('/instance/create', { framework: 'openclaw' });
      if (r.status !== 200) throw new Error(`create: ${r.status} ${r.text}`);
      const id = r.body.instance_id as string;
      calledAt.set(id, epoch);
      await waitFor(`running ${id}`, async () => (await api.get(`/instance/status/${id}`)).body.status === 'running', 180_000, 50);
      ms.push(performance.now() - t0);
    }),
  );
  for (const i of (await api.get('/instance/list')).body.instances) await api.del(`/instance/delete/${i.instance_id}`);
  return ms;
}

const p50 = (xs: number[]) => Math.round([...xs].sort((a, b) => a - b)[Math.ceil(xs.length / 2) - 1] ?? NaN);

log('deploying the stack on the two-node swarm');
await removeStrayInstances();
await deployStack(state);
const session = await signIn(apiClient(apiUrl()));
await subscribe({ chain: swarmChain }, session, { tier: 'enterprise' });

const gateway: Awaited<ReturnType<typeof gatewayRun>>[] = [];
for (const n of [1, 2, 2, 1]) {
  log(`gateway ×${n}`);
  gateway.push(await gatewayRun(n, session.token));
}
await scale('gateway=2');
const avg = (n: number, k: 'rps' | 'cpu_us_per_request') => Math.round(gateway.filter((g) => g.replicas === n).reduce((a, g) => a + g[k], 0) / 2);

log('create → running: docker driver (bench/instances) and swarm driver, same concurrency');
const dockerFile = path.join(os.tmpdir(), `bench-docker-driver-${process.pid}.json`);
await exec(process.execPath, [path.join(repo, 'bench/instances/run.ts')], {
  env: { ...process.env, BENCH_CONCURRENCY: String(CREATES), BENCH_ROUNDS: '2', BENCH_RESULT_FILE: dockerFile },
  maxBuffer: 16 << 20,
});
const dockerDriver = JSON.parse(readFileSync(dockerFile, 'utf8')) as { provisioner_create_to_running_ms: { p50: number } };
const createsSince = Math.floor(Date.now() / 1000) - 1;
const containers = await watchContainers([manager, worker]);
const swarmMs = [...(await swarmCreates(session.api)), ...(await swarmCreates(session.api))];
const phases = medians(await breakdown(manager, containers.stop(), createsSince, calledAt));

const result = {
  benchmark: 'swarm',
  when: new Date().toISOString(),
  host: { cpus: os.cpus().length, nodes: 2, note: "both swarm nodes share this machine's cores" },
  gateway: {
    runs: gateway,
    rps_x1: avg(1, 'rps'),
    rps_x2: avg(2, 'rps'),
    ratio_x2_over_x1: Math.round((avg(2, 'rps') / avg(1, 'rps')) * 100) / 100,
    cpu_us_per_request_x1: avg(1, 'cpu_us_per_request'),
    cpu_us_per_request_x2: avg(2, 'cpu_us_per_request'),
  },
  create_to_running: {
    concurrency: CREATES,
    docker_driver_p50_ms: dockerDriver.provisioner_create_to_running_ms.p50,
    swarm_driver_p50_ms: p50(swarmMs),
    added_p50_ms: p50(swarmMs) - dockerDriver.provisioner_create_to_running_ms.p50,
    target: { added_p50_ms_max: 1000 },
    target_met: p50(swarmMs) - dockerDriver.provisioner_create_to_running_ms.p50 <= 1000,
    swarm_phases_p50: phases,
  },
};
console.log(JSON.stringify(result, null, 2));
mkdirSync(path.join(repo, 'bench/results'), { recursive: true });
writeFileSync(path.join(repo, 'bench/results/swarm.json'), `${JSON.stringify(result, null, 2)}\n`);
process.exit(0);
