import type Docker from 'dockerode';
import { httpHealthCheck, pinTo } from '@agenthost/shared';
import { AGENT_PORT, AGENT_USER, labels, nodeOptions } from '../docker/spec.ts';

/** The swarm objects of one instance, by name: its service, its network, its volume (on its node), its credentials. */
export const serviceName = (instanceId: string): string => `agenthost-${instanceId}`;
/** The overlay of an instance's moves (mover.ts); the instance runs on its node's instance bridge (instance-network.ts). */
export const networkName = (instanceId: string): string => `agenthost-net-${instanceId}`;
export const volumeName = (instanceId: string): string => `agenthost-${instanceId}`;
export const credentialsSecretPrefix = (instanceId: string): string => `agenthost-cred-${instanceId}-`;
/** Where the agent finds its credentials (a swarm secret: in memory on its node, readable by the agent user only). */
const CREDENTIALS_FILE = '/run/secrets/agenthost-credentials';

const MB = 1024 * 1024;

const S = 1_000_000_000;

export interface SwarmInstanceInput {
  instanceId: string;
  userId: string;
  scope: string;
  /** By image id: the task starts from its node's image without asking a registry. */
  image: string;
  node: string;
  /** The instance bridge of every node (instance-network.ts). */
  network: string;
  port: number;
  memoryMb: number;
  cpus: number;
  /** The CPU reserved on the node (a share of `cpus`, SWARM_CPU_RESERVATION). */
  reserveCpus: number;
  pids: number;
  tmpfsMb: number;
  /** Between the swarm's restarts of a crashed task (it has a fixed delay, no backoff: see healing.ts). */
  restartDelaySeconds: number;
  stopTimeoutSeconds: number;
  env: Record<string, string>;
  /** What the engine's API version allows beyond 1.41 (checked at start). */
  extraSecurity: { noNewPrivileges: boolean };
}

/**
 * One replicated service (replicas 0 when stopped, 1 when started) pinned to one node, hardened as far as
 * the Engine API allows: non-root, every capability dropped, read-only root with a size-limited /tmp, the
 * tier's memory, CPU and pids as limits, its memory and a share of its CPU as reservations, a health check so the task
 * counts as running only once the agent is ready, its node's instance bridge (no way to other instances or to our
 * services), its port published on its node.
 */
export function instanceServiceSpec(i: SwarmInstanceInput): Docker.ServiceSpec & { Name: string } {
  const l = labels(i);
  const memoryBytes = i.memoryMb * MB;
  const env = { ...i.env, NODE_OPTIONS: nodeOptions(i.memoryMb), AGENTHOST_CREDENTIALS: `file:${CREDENTIALS_FILE}` };
  const containerSpec = {
    Image: i.image,
    Hostname: i.instanceId.slice(0, 63),
    User: AGENT_USER,
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    Labels: l,
    ReadOnly: true,
    // An init as PID 1 (docker-init), as on the docker driver: zombies are reaped and signals reach the agent.
    Init: true,
    CapabilityDrop: ['ALL'],
    ...(i.extraSecurity.noNewPrivileges ? { Privileges: { NoNewPrivileges: true } } : {}),
    Mounts: [
      { Type: 'volume', Source: volumeName(i.instanceId), Target: '/data', VolumeOptions: { NoCopy: false, Labels: l, DriverConfig: { Name: 'local' } } },
      { Type: 'tmpfs', Target: '/tmp', TmpfsOptions: { SizeBytes: i.tmpfsMb * MB, Mode: 0o1777 } },
    ],
    // Every check is a `docker exec`, and runc's exec is what costs: an idle agent checked every 1 s took 0.13 of a
    // core here, every 5 s 0.03 (decision 0061), so a node held few idle agents. Nothing waits on
    // the first check but the task's `running` state: readiness is an HTTP probe of the published port, and a
    // returning node's instances are picked up by the reconciler's follow-up passes (domain/follow-ups.ts). 3 × 5 s
    // keep a busy agent ~15 s of grace before the swarm replaces it.
    Healthcheck: {
      Test: httpHealthCheck(AGENT_PORT, '/readyz'),
      Interval: 5 * S,
      Timeout: 4 * S,
      Retries: 3,
      StartPeriod: 180 * S,
    },
    StopGracePeriod: i.stopTimeoutSeconds * S,
    Secrets: [],
  };
  return {
    Name: serviceName(i.instanceId),
    Labels: l,
    TaskTemplate: {
      ContainerSpec: containerSpec as unknown as Docker.ContainerSpec,
      Resources: {
        Limits: { MemoryBytes: memoryBytes, NanoCPUs: Math.round(i.cpus * 1e9), Pids: i.pids },
        Reservations: { MemoryBytes: memoryBytes, NanoCPUs: Math.round(i.reserveCpus * 1e9) },
      } as Docker.TaskSpec['Resources'],
      // The swarm never gives up on a crashed task either (MaxAttempts 0 = unlimited), at a fixed delay.
      RestartPolicy: { Condition: 'on-failure', Delay: i.restartDelaySeconds * S, MaxAttempts: 0 },
      // Pinned: its volume lives on that node.
      Placement: { Constraints: [pinTo(i.node)] },
      Networks: [{ Target: i.network }],
      LogDriver: { Name: 'json-file', Options: { 'max-size': '10m', 'max-file': '3' } },
    },
    Mode: { Replicated: { Replicas: 0 } },
    EndpointSpec: {
      Mode: 'dnsrr',
      Ports: [{ Protocol: 'tcp', TargetPort: AGENT_PORT, PublishedPort: i.port, PublishMode: 'host' }],
    } as Docker.ServiceSpec['EndpointSpec'],
  };
}

/** The parts of an instance service's spec that the runtime and a backup's copy read and change. */
export type Spec = {
  Name: string;
  Labels?: Record<string, string>;
  Mode?: { Replicated?: { Replicas?: number } };
  TaskTemplate: { ContainerSpec?: { Image?: string; Env?: string[]; Secrets?: unknown[] }; ForceUpdate?: number; Placement?: { Constraints?: string[] } };
};
