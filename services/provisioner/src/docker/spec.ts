import type Docker from 'dockerode';
import { containerName } from '@agenthost/shared';

/** The agent listens here inside the container (OpenClaw gateway and the stand-in alike). */
export const AGENT_PORT = 18789;
/** Non-root user of the agent images (created in deploy/images/runtime). */
export const AGENT_USER = '10001:10001';

/** The environment variable that carries the OpenClaw gateway token into the agent. */
export const TOKEN_ENV = 'OPENCLAW_GATEWAY_TOKEN';

/**
 * A checkpointable agent's container (docker/checkpoint.ts, docs/decisions/0049-...): the CRIU runtime is bind-mounted
 * read-only here, and its hold-init is PID 1 in place of docker-init.
 */
export const CRIU_MOUNT = '/opt/agenthost-criu';
export const HOLD_INIT = `${CRIU_MOUNT}/hold-init`;

export const LABEL_INSTANCE = 'agenthost.instance';
export const LABEL_USER = 'agenthost.user';
export const LABEL_MANAGED = 'agenthost.managed';
export const LABEL_SCOPE = 'agenthost.scope';

/** An instance's container name: in packages/shared (instance-host.ts), where tests find it too. */
export { containerName };
export const volumeName = (instanceId: string): string => `agenthost-${instanceId}`;

export interface ContainerInput {
  instanceId: string;
  userId: string;
  scope: string;
  image: string;
  network: string;
  publishHost: string;
  port: number;
  memoryMb: number;
  cpus: number;
  pids: number;
  tmpfsMb: number;
  stopTimeoutSeconds: number;
  /** Environment: credentials, keys URL, gateway token, extra settings. */
  env: Record<string, string>;
  /**
   * A checkpointable container (docker/checkpoint.ts): hold-init runs the image's own entrypoint and command, the CRIU
   * runtime is mounted read-only, and io_uring is refused (CRIU cannot dump it).
   */
  checkpoint?: { runtimeDir: string; seccomp: string; entrypoint: string[]; cmd: string[] };
}

/** V8 old-space cap: ~75 % of the memory limit, so the heap never outgrows the cgroup (OpenClaw crash-loops otherwise). */
export const heapMb = (memoryMb: number): number => Math.max(32, Math.floor(memoryMb * 0.75));

/**
 * Every Node process of the agent: the heap cap. `--max-semi-space-size=1` (decision 0051: ~108 MB less idle) was set
 * on 29 Nov and withdrawn the same day: right after a start, OpenClaw (pro, 1 CPU) then missed the
 * bootstrap's 12 s to take a key's provider settings twice under load (readme and first-hour suites), which it had met.
 */
export const nodeOptions = (memoryMb: number): string => `--max-old-space-size=${heapMb(memoryMb)}`;

export const labels = (i: { instanceId: string; userId: string; scope: string }): Record<string, string> => ({
  [LABEL_INSTANCE]: i.instanceId,
  [LABEL_USER]: i.userId,
  [LABEL_MANAGED]: 'true',
  [LABEL_SCOPE]: i.scope,
});

/** The instance's state volume at /data (made with the first container that mounts it, labelled for the reconciler). */
export const dataMount = (i: { instanceId: string; userId: string; scope: string }) => ({
  Type: 'volume' as const,
  Source: volumeName(i.instanceId),
  Target: '/data',
  ReadOnly: false,
  VolumeOptions: { NoCopy: false, Labels: labels(i), DriverConfig: { Name: 'local', Options: {} } },
});

/**
 * The hardened container of one instance: non-root, no capabilities, no privilege escalation, read-only
 * root with a size-limited /tmp, one named volume for the agent's state, tier limits on memory (no
 * swap), CPU and pids, the agent port published on one host address only, and the isolated network.
 */
export function containerSpec(i: ContainerInput): Docker.ContainerCreateOptions {
  const portKey = `${AGENT_PORT}/tcp`;
  const ckpt = i.checkpoint;
  const memoryBytes = i.memoryMb * 1024 * 1024;
  const env = { ...i.env, NODE_OPTIONS: nodeOptions(i.memoryMb) };
  return {
    name: containerName(i.instanceId),
    Image: i.image,
    Hostname: i.instanceId.slice(0, 63),
    User: AGENT_USER,
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    // The instance credentials arrive on stdin at each start (docker/handoff.ts), never in this spec.
    OpenStdin: true,
    StdinOnce: false,
    AttachStdin: false,
    Labels: labels(i),
    // Given an entrypoint, Docker drops the image's command: both are restated.
    ...(ckpt ? { Entrypoint: [HOLD_INIT, ...ckpt.entrypoint], Cmd: ckpt.cmd } : {}),
    ExposedPorts: { [portKey]: {} },
    StopTimeout: i.stopTimeoutSeconds,
    HostConfig: {
      NetworkMode: i.network,
      PortBindings: { [portKey]: [{ HostIp: i.publishHost, HostPort: String(i.port) }] },
      // The volume is created with the container (as `docker run -v` does), labelled so that the
      // reconciler can find it; an existing one (restart/start) is reused as it is.
      Mounts: [dataMount(i), ...(ckpt ? [{ Type: 'bind' as const, Source: ckpt.runtimeDir, Target: CRIU_MOUNT, ReadOnly: true }] : [])],
      ReadonlyRootfs: true,
      Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${i.tmpfsMb}m,mode=1777` },
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true', ...(ckpt ? [`seccomp=${ckpt.seccomp}`] : [])],
      Privileged: false,
      PidsLimit: i.pids,
      Memory: memoryBytes,
      MemorySwap: memoryBytes,
      NanoCpus: Math.round(i.cpus * 1e9),
      // The provisioner restarts a crashed agent itself, with backoff and a record of each crash
      // (domain/healing.ts): the engine's own policy would restart it unseen and give up after its retries.
      RestartPolicy: { Name: 'no' },
      // docker-init (tini) as PID 1: zombies are reaped and signals forwarded to the agent. hold-init does the same,
      // and outlives a checkpointed agent.
      Init: !ckpt,
      LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } },
      IpcMode: 'private',
    },
    NetworkingConfig: { EndpointsConfig: { [i.network]: {} } },
  };
}
