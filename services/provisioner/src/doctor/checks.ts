import { createHash } from 'node:crypto';
import http from 'node:http';
import type Docker from 'dockerode';
import type { InstanceRow } from '../db/schema.ts';
import {
  AGENT_PORT,
  AGENT_USER,
  containerName,
  CRIU_MOUNT,
  HOLD_INIT,
  LABEL_INSTANCE,
  LABEL_MANAGED,
  LABEL_SCOPE,
  LABEL_USER,
  TOKEN_ENV,
} from '../docker/spec.ts';

/** One difference between what the provisioner intended and what runs, with what an operator does about it. */
export interface Finding {
  instance_id?: string;
  check: string;
  problem: string;
  fix: string;
}

/** What the doctor found: drift fails it. */
export interface DoctorReport {
  /** The provisioner scope (label value and database) audited. */
  scope: string;
  ok: boolean;
  instances: number;
  /** Differences from what the provisioner intended: any one makes the doctor exit non-zero. */
  drift: Finding[];
  /** States worth knowing that are no drift: failed instances, agents waiting for their restart, operations in progress. */
  notes: Finding[];
}

/** What the provisioner intends for every container of its scope (from its configuration). */
export interface Intent {
  network: string;
  publishHost: string;
  /** INSTANCE_EXTRA_ENV_JSON's names: set by the operator, allowed. */
  extraEnv: string[];
}

/** The environment variables the provisioner sets (docker/runtime.ts, spec.ts). */
const OWN_ENV = new Set([
  'AGENTHOST_INSTANCE_ID',
  'AGENTHOST_CREDENTIALS',
  'AGENTHOST_KEYS_URL',
  'AGENTHOST_KEYS_WATCH',
  'NODE_OPTIONS',
  'AGENTHOST_PUBLIC_URL',
  TOKEN_ENV,
]);
const OWN_LABELS = new Set([LABEL_INSTANCE, LABEL_USER, LABEL_MANAGED, LABEL_SCOPE]);

/** Names of agenthost's own credentials: none may ever be in a container's configuration. */
const SECRET_NAME =
  /^(AGENTHOST_INSTANCE_(SECRET|KEY)|MASTER_KEY|MASTER_KEYS_PREVIOUS|DATABASE_URL|AUTH_JWT_PRIVATE_KEY|GATEWAY_ASSERTION_PRIVATE_KEY|KEYVAULT_SEAL_PRIVATE_KEY|NATS_NKEY_SEED|KEEPER_SECRET_KEY)/;
/** Values that are credentials whatever their name: a private key, a URL with a password, an nkey seed, a JWT. */
const SECRET_VALUE = [
  /-----BEGIN [A-Z ]*PRIVATE KEY-----/,
  /^[a-z][a-z0-9+.-]*:\/\/[^\s:@/]+:[^\s@/]+@/i,
  /^S[ACNOPU][A-Z2-7]{54}$/,
  /^eyJ[\w-]+\.eyJ[\w-]+\.[\w-]+$/,
];

const recreate = (id: string) =>
  `recreate it from the intended spec: its owner restarts it (POST /api/instance/restart/${id}), or remove the container (docker rm -f ${containerName(id)}) and the reconciler marks it failed for its owner to restart`;

/**
 * Audit one instance container against its row and the provisioner's intent: hardening, limits, user, network,
 * published port, restart policy and init, the token, and no credential in its environment, labels or command.
 * `image` is the image the container was made from (its own environment, labels and command are the image's).
 */
export function auditContainer(row: InstanceRow, c: Docker.ContainerInspectInfo, image: Docker.ImageInspectInfo | undefined, intent: Intent): Finding[] {
  const out: Finding[] = [];
  const id = row.id;
  const name = containerName(id);
  const h = c.HostConfig as Docker.HostConfig & { Init?: boolean | null; CapAdd?: string[] | null; Devices?: unknown[] | null };
  const drift = (check: string, problem: string, fix = recreate(id)) => out.push({ instance_id: id, check, problem, fix });

  if (c.Config.User !== AGENT_USER) drift('user', `runs as "${c.Config.User || 'root'}", not ${AGENT_USER}`);
  if (JSON.stringify(h.CapDrop ?? []) !== '["ALL"]') drift('capabilities', `drops ${JSON.stringify(h.CapDrop ?? [])}, not ["ALL"]`);
  if ((h.CapAdd ?? []).length) drift('capabilities', `adds ${(h.CapAdd ?? []).join(', ')}`);
  if (h.Privileged) drift('privileged', 'is privileged');
  if (!(h.SecurityOpt ?? []).includes('no-new-privileges:true')) drift('no-new-privileges', 'may gain privileges (no-new-privileges is not set)');
  if (!h.ReadonlyRootfs) drift('read-only root', 'has a writable root filesystem');
  if (!h.Init && !holdInit(c.Config.Entrypoint)) drift('init', 'has no init process as PID 1');
  if (h.RestartPolicy?.Name && h.RestartPolicy.Name !== 'no')
    drift(
      'restart policy',
      `has Docker restart policy "${h.RestartPolicy.Name}": restarts would bypass the self-healing`,
      `docker update --restart no ${name}`,
    );
  if ((h.Devices ?? []).length) drift('devices', `has host devices ${JSON.stringify(h.Devices)}`);
  for (const mode of ['NetworkMode', 'PidMode', 'IpcMode', 'UTSMode', 'UsernsMode'] as const) {
    if ((h as Record<string, unknown>)[mode] === 'host') drift('namespaces', `shares the host's ${mode.replace('Mode', '')} namespace`);
  }

  const memory = row.memory_mb * 1024 * 1024;
  if (h.PidsLimit !== row.pids)
    drift('pids limit', `pids limit ${h.PidsLimit ?? 'none'}, intended ${row.pids}`, `docker update --pids-limit ${row.pids} ${name}`);
  // A light sleep pushed the agent's memory out to swap: its limit is lowered, its memory+swap limit is its tier's.
  const swapped = row.status === 'sleeping' && row.sleep_depth === 'swapped' && (h.Memory ?? 0) <= memory && h.MemorySwap === memory;
  if (!swapped && (h.Memory !== memory || h.MemorySwap !== memory)) {
    drift(
      'memory limit',
      `memory ${h.Memory ?? 0} B (swap ${h.MemorySwap ?? 0} B), intended ${memory} B without swap`,
      `docker update --memory ${row.memory_mb}m --memory-swap ${row.memory_mb}m ${name}`,
    );
  }
  // An agent that is starting may boot on a burst of CPU (BOOT_CPUS); it gets its share once it is ready.
  const bursting = row.status === 'provisioning' && (h.NanoCpus ?? 0) > Math.round(row.cpus * 1e9);
  if (!bursting && h.NanoCpus !== Math.round(row.cpus * 1e9))
    drift('cpu limit', `CPU limit ${(h.NanoCpus ?? 0) / 1e9}, intended ${row.cpus}`, `docker update --cpus ${row.cpus} ${name}`);

  const mounts = c.Mounts ?? [];
  // A writable CRIU runtime would let the agent change what runs as host root at its next checkpoint or restore.
  for (const m of mounts.filter((m) => criuRuntime(m) && m.RW !== false))
    drift('mounts', `mounts ${m.Source} at ${m.Destination} writable: the CRIU runtime must be read-only`);
  const foreign = mounts.filter((m) => m.Destination !== '/data' && !criuRuntime(m));
  if (foreign.length) drift('mounts', `mounts ${foreign.map((m) => `${m.Source} at ${m.Destination}`).join(', ')} beside its volume`);
  const nets = Object.keys(c.NetworkSettings?.Networks ?? {});
  if (nets.length !== 1 || nets[0] !== intent.network) drift('network', `is on ${JSON.stringify(nets)}, not only on ${intent.network}`);
  const published = h.PortBindings?.[`${AGENT_PORT}/tcp`] ?? [];
  if (published.length !== 1 || published[0]!.HostIp !== intent.publishHost || published[0]!.HostPort !== String(row.port)) {
    drift('published port', `publishes ${JSON.stringify(published)}, intended ${intent.publishHost}:${row.port} only`);
  }
  const otherPorts = Object.keys(h.PortBindings ?? {}).filter((p) => p !== `${AGENT_PORT}/tcp`);
  if (otherPorts.length) drift('published port', `also publishes ${otherPorts.join(', ')}`);

  out.push(...auditSecrets(row, c.Config, image, intent.extraEnv, recreate(id)));
  return out;
}

/**
 * A checkpointable container's PID 1 is hold-init (docker/checkpoint.ts) in place of docker-init: it reaps and
 * forwards signals as docker-init does, and is the one process left while the agent sleeps checkpointed. Docker
 * reads a string entrypoint as one word; its first word is compared all the same.
 */
function holdInit(entrypoint: string | string[] | undefined): boolean {
  const first = typeof entrypoint === 'string' ? entrypoint.trim().split(/\s+/)[0] : entrypoint?.[0];
  return first === HOLD_INIT;
}

/** The host's CRIU runtime bind-mounted into a checkpointable container (read-only or not: auditContainer says). */
const criuRuntime = (m: { Type: string; Destination: string }) => m.Type === 'bind' && m.Destination === CRIU_MOUNT;

/** What an instance's container is configured with (a container's Config, or a swarm service's ContainerSpec). */
export interface InstanceConfig {
  Env?: string[];
  Labels?: Record<string, string>;
  Entrypoint?: string | string[];
  Cmd?: string[];
}

/**
 * No agenthost credential in the instance's environment, labels or command; the token is the instance's own.
 * `extraEnv`: INSTANCE_EXTRA_ENV_JSON's names (allowed); `recreateFix`: how the instance is made again from the
 * intended spec (per driver).
 */
export function auditSecrets(
  row: InstanceRow,
  c: InstanceConfig,
  image: Docker.ImageInspectInfo | undefined,
  extraEnv: string[],
  recreateFix: string,
): Finding[] {
  const out: Finding[] = [];
  const id = row.id;
  const fix = `${recreateFix}; then rotate the exposed credential`;
  const imageEnv = new Set(image?.Config?.Env ?? []);
  const allowed = new Set([...OWN_ENV, ...extraEnv]);
  for (const entry of c.Env ?? []) {
    const eq = entry.indexOf('=');
    const key = entry.slice(0, eq);
    const value = entry.slice(eq + 1);
    if (key === TOKEN_ENV) {
      if (createHash('sha256').update(value).digest('hex') !== row.access_token_hash)
        out.push({ instance_id: id, check: 'token', problem: `${TOKEN_ENV} is not the instance's access token`, fix: recreateFix });
      continue;
    }
    if (SECRET_NAME.test(key) || SECRET_VALUE.some((p) => p.test(value)))
      out.push({ instance_id: id, check: 'secrets', problem: `environment variable ${key} holds a credential`, fix });
    else if (!allowed.has(key) && !imageEnv.has(entry))
      out.push({ instance_id: id, check: 'environment', problem: `environment variable ${key} was not set by the provisioner`, fix: recreateFix });
  }
  const imageLabels = image?.Config?.Labels ?? {};
  for (const [key, value] of Object.entries(c.Labels ?? {})) {
    if (SECRET_VALUE.some((p) => p.test(value)) || SECRET_NAME.test(key.toUpperCase()))
      out.push({ instance_id: id, check: 'secrets', problem: `label ${key} holds a credential`, fix });
    else if (!OWN_LABELS.has(key) && imageLabels[key] !== value)
      out.push({ instance_id: id, check: 'labels', problem: `label ${key} was not set by the provisioner`, fix: recreateFix });
  }
  for (const arg of [c.Entrypoint ?? [], c.Cmd ?? []].flat()) {
    if (SECRET_VALUE.some((p) => p.test(arg))) out.push({ instance_id: id, check: 'secrets', problem: 'the command line holds a credential', fix });
  }
  return out;
}

/** Steps of an operation in progress: its instance is noted, not audited. */
const BUSY_STEPS = new Set(['leased', 'container', 'recreating', 'stopping', 'sleeping', 'deleting']);

/** The note for an instance an operation is working on (it is not audited then), or undefined. */
export function busy(row: InstanceRow): Finding | undefined {
  if (!row.deleting_at && !BUSY_STEPS.has(row.step)) return undefined;
  return {
    instance_id: row.id,
    check: 'operation',
    problem: `an operation is in progress (step ${row.step})`,
    fix: 'none: run the doctor again once it is done',
  };
}

/** Inspects images by reference, each once per audit (undefined: not on this engine). */
export function imageLookup(docker: Docker): (ref: string) => Promise<Docker.ImageInspectInfo | undefined> {
  const images = new Map<string, Promise<Docker.ImageInspectInfo | undefined>>();
  return (ref) => {
    let p = images.get(ref);
    if (!p) {
      p = docker
        .getImage(ref)
        .inspect()
        .catch(() => undefined);
      images.set(ref, p);
    }
    return p;
  };
}

/** The agent answers GET /healthz at host:port. */
export function healthy(host: string, port: number): Promise<boolean> {
  const h = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return new Promise((resolve) => {
    const req = http.get({ host: h, port, path: '/healthz', timeout: 3000, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}
