import { setTimeout as sleep } from 'node:timers/promises';
import type { DockerEngine } from '../docker/engine.ts';
import { o } from '../docker/call.ts';
import { LABEL_MANAGED, LABEL_SCOPE } from '../docker/spec.ts';
import { JOB_SERVICE_LABEL, pinTo } from '@agenthost/shared';

/** On the containers of our one-shot jobs (copies, removals), so that a removal can find those left behind. */
const JOB_LABEL = 'agenthost.job';

/**
 * A volume lives on its node, and a manager's Engine API cannot remove it there. So a one-shot swarm job
 * on that node does it through the node's own engine: it asks to remove the volume until the instance's
 * container (going away with its service) no longer holds it. Containers of our own jobs that still hold it
 * go first: the engine (20.10) leaves a job's container behind when the job's service is removed. The job
 * runs our own image, as root only because the node's Docker socket is root's.
 */
const SCRIPT = `
const http = require('node:http');
const name = process.argv[1];
const call = (method, path) => new Promise((res) => {
  const req = http.request({ socketPath: '/var/run/docker.sock', method, path }, (r) => {
    let body = '';
    r.on('data', (c) => (body += c));
    r.on('end', () => res({ status: r.statusCode, body }));
  });
  req.on('error', () => res({ status: 0, body: '' }));
  req.end();
});
const filters = encodeURIComponent(JSON.stringify({ volume: [name], label: ['${JOB_LABEL}=true'] }));
(async () => {
  for (let i = 0; i < 120; i++) {
    const jobs = await call('GET', '/containers/json?all=1&filters=' + filters);
    for (const c of jobs.status === 200 ? JSON.parse(jobs.body) : []) await call('DELETE', '/containers/' + c.Id + '?force=1');
    const { status } = await call('DELETE', '/volumes/' + encodeURIComponent(name));
    if (status === 204 || status === 404) process.exit(0);
    await new Promise((r) => setTimeout(r, 500));
  }
  process.exit(1);
})();
`;

/** A node whose engine socket is not /var/run/docker.sock says where it is with this node label. */
const SOCKET_LABEL = 'agenthost.docker-socket';

/** Where a node's engine socket is (from the node's labels), for a job on that node that calls its engine. */
export const socketOf = (labels: Record<string, string> | undefined): string => labels?.[SOCKET_LABEL] ?? '/var/run/docker.sock';

async function nodeSocket(engine: DockerEngine, node: string): Promise<string> {
  const info = await engine.run('node inspect', (abortSignal) => engine.docker.getNode(node).inspect(o({ abortSignal })));
  return socketOf(info.Spec?.Labels as Record<string, string> | undefined);
}

type VolumeRemoval = { node: string; volume: string; image: string; scope: string; timeoutMs: number };

export async function removeVolumeOnNode(engine: DockerEngine, p: VolumeRemoval): Promise<boolean> {
  return runJob(engine, await removalJob(engine, p));
}

/**
 * Start the removal now and wait for it later: a move starts it while the instance's service still holds the node,
 * so that something of ours is pinned there at every moment and `drain` (deploy/swarm/src/nodes.ts) does not put the
 * node in the swarm's drain, where the job would never run, between the two.
 */
export async function startVolumeRemoval(engine: DockerEngine, p: VolumeRemoval): Promise<() => Promise<boolean>> {
  const job = await removalJob(engine, p);
  const id = await startJob(engine, job);
  return () => finishJob(engine, id, job.timeoutMs);
}

async function removalJob(engine: DockerEngine, p: VolumeRemoval): Promise<Job> {
  const socket = await nodeSocket(engine, p.node);
  return {
    name: `agenthost-janitor-${p.volume.slice(-24)}-${Date.now().toString(36)}`,
    scope: p.scope,
    node: p.node,
    timeoutMs: p.timeoutMs,
    container: {
      Image: p.image,
      User: '0',
      Command: ['/usr/local/bin/node', '-e', SCRIPT, p.volume],
      ReadOnly: true,
      CapabilityDrop: ['ALL'],
      Mounts: [{ Type: 'bind', Source: socket, Target: '/var/run/docker.sock' }],
    },
  };
}

export interface Job {
  name: string;
  scope: string;
  /** The node it runs on. */
  node: string;
  container: Record<string, unknown>;
  networks?: string[];
  timeoutMs: number;
}

/**
 * A one-shot swarm job on one node; resolves true once its task completed (exit 0), false when it failed or timed out,
 * or when a job it needs (`needs`: a copy's sender) failed first. Always removed.
 */
export async function runJob(engine: DockerEngine, job: Job, needs?: string): Promise<boolean> {
  return finishJob(engine, await startJob(engine, job), job.timeoutMs, needs);
}

/** Wait for a started job (true once its task completed), then remove it whatever the outcome. */
async function finishJob(engine: DockerEngine, id: string, timeoutMs: number, needs?: string): Promise<boolean> {
  try {
    return await waitJob(engine, id, timeoutMs, needs);
  } finally {
    await removeJob(engine, id);
  }
}

export async function startJob(engine: DockerEngine, job: Job): Promise<string> {
  const created = (await engine.run('job create', () =>
    engine.docker.createService(
      o({
        Name: job.name,
        Labels: { [LABEL_MANAGED]: 'true', [LABEL_SCOPE]: job.scope, [JOB_SERVICE_LABEL]: 'true' },
        TaskTemplate: {
          ContainerSpec: { ...job.container, Labels: { [JOB_LABEL]: 'true' } },
          Placement: { Constraints: [pinTo(job.node)] },
          RestartPolicy: { Condition: 'none' },
          Resources: { Limits: { MemoryBytes: 256 * 1024 * 1024 } },
          ...(job.networks ? { Networks: job.networks.map((Target) => ({ Target })) } : {}),
        },
        Mode: { ReplicatedJob: { MaxConcurrent: 1, TotalCompletions: 1 } },
        ...(job.networks && !job.networks.includes('host') ? { EndpointSpec: { Mode: 'dnsrr' } } : {}),
      }) as never,
    ),
  )) as { id?: string; ID?: string };
  return created.id ?? created.ID ?? job.name;
}

const failed = (s: string | undefined) => s === 'failed' || s === 'rejected';

async function waitJob(engine: DockerEngine, id: string, timeoutMs: number, needs?: string): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  const states = async (service: string) =>
    (await engine.run('task list', (abortSignal) => engine.docker.listTasks(o({ filters: { service: [service] }, abortSignal })))).map((t) => t.Status?.State);
  while (Date.now() < end) {
    const own = await states(id);
    if (own.includes('complete')) return true;
    if (own.some(failed)) return false;
    // A receiver whose sender is gone would only retry until its timeout (ten minutes by default): fail now, and the
    // next pass tries again.
    if (needs && (await states(needs)).some(failed)) return false;
    await sleep(250);
  }
  return false;
}

export async function removeJob(engine: DockerEngine, id: string): Promise<void> {
  await engine.run('job remove', (abortSignal) => engine.docker.getService(id).remove(o({ abortSignal }))).catch(() => {});
}

/** Remove our job services older than `olderThanMs` (a provisioner that died mid-job left them); returns how many. */
export async function sweepJobs(engine: DockerEngine, scope: string, olderThanMs: number): Promise<number> {
  const jobs = await engine.run('service list', (abortSignal) =>
    engine.docker.listServices(o({ filters: { label: [`${JOB_SERVICE_LABEL}=true`, `${LABEL_SCOPE}=${scope}`] }, abortSignal })),
  );
  const stale = jobs.filter((j) => Date.now() - Date.parse(j.CreatedAt ?? '') > olderThanMs);
  for (const j of stale) await removeJob(engine, j.ID);
  return stale.length;
}
