import type Docker from 'dockerode';
import { healthCheckCommand, httpHealthCheck, pinTo } from '@agenthost/shared';
import { NATS_CLIENT_URL, NATS_NODES, SCHEMAS, SECRET_DIR } from './material.ts';
import { edgeSpec, type EdgePorts } from './edge-spec.ts';
import { envList, hardened, health, type Mount, resources, rolling } from './service-parts.ts';
import { type ConfiguredPart, ownEnv } from './service-env.ts';

/**
 * The agenthost stack as swarm service specs (Engine API 1.41): NATS ×3 (JetStream, R3), Postgres pinned
 * to one node, devchain, the five services with their own replica counts, and the edge (Caddy, one per node)
 * in front of the gateways. Every service has reservations and limits, a health check, a rolling update that
 * starts the new task first and rolls back by itself when it fails, and runs non-root with every capability
 * dropped on a read-only root.
 */

export const STACK = 'agenthost';
export const LABEL_STACK = 'agenthost.stack';
export const NETWORK = `${STACK}`;
/** Where the provisioner keeps backup archives (the image makes it, owned by the service user, so the volume is). */
const BACKUP_DIR = '/var/lib/agenthost/backups';

/** The overlay's subnet: the gateway trusts X-Forwarded-For from the edge only on it. */
export const SUBNET = '10.213.0.0/16';
const SERVICE_UID = '10100';
const HEALTH_PORT = 9090;
export const METRICS_PORT = 9464;

export type ImageName = 'gateway' | 'auth' | 'billing-chain' | 'provisioner' | 'keyvault' | 'devchain' | 'postgres' | 'nats' | 'edge';

export interface StackOptions {
  /** Image per part, by image id (sha256:…): a task never waits on a registry for an image its node has. */
  images: Record<ImageName, string>;
  replicas: Record<'gateway' | 'auth' | 'billing-chain' | 'provisioner' | 'keyvault', number>;
  /** Secret name → the swarm secret holding its current content. */
  secrets: Record<string, { id: string; name: string }>;
  /** The ports every node's edge listens on (host mode: the routing mesh needs IPVS). */
  edgePorts: EdgePorts;
  /** The API at https://<domain>/api, instances at https://<id>.<domain>. */
  edgeDomain: string;
  /** The operator's settings (agenthost.env), after ours: each service gets those its configuration reads. */
  env: Record<string, string>;
  /** Postgres runs on the node with this label (node.labels.agenthost.postgres == true); none with an external database. */
  postgres: boolean;
  /** devchain (the local Solana stand-in) runs unless SOLANA_RPC_URL is given. */
  solanaRpcUrl?: string;
  /** devchain's JSON-RPC port on the managers, for wallets (and the WebSocket alias on the next port). */
  devchainPort: number;
  /** The Docker GID of the managers' socket, for the provisioner. */
  dockerGid: string;
  /** The node each NATS server is pinned to (its JetStream store is there), spread so that a quorum survives one node. */
  natsNodes: Record<string, string>;
}

type Spec = Docker.ServiceSpec & { Name: string };
/** A task mount (Engine API), looser than dockerode's type: tmpfs mounts have no source. */
type PortConfig = { Protocol: 'tcp' | 'udp'; TargetPort: number; PublishedPort: number; PublishMode: 'host' | 'ingress' };

const secret = (o: StackOptions, name: string, uid = SERVICE_UID, target = name) => {
  const s = o.secrets[name];
  if (!s) throw new Error(`no swarm secret for ${name}`);
  return { SecretID: s.id, SecretName: s.name, File: { Name: target, UID: uid, GID: uid, Mode: 0o400 } };
};

function service(
  name: string,
  p: {
    image: string;
    replicas?: number;
    global?: boolean;
    env?: Record<string, string>;
    secrets?: ReturnType<typeof secret>[];
    healthTest: string[];
    healthPatience?: { timeoutSeconds: number; retries: number };
    res: ReturnType<typeof resources>;
    order?: 'start-first' | 'stop-first';
    constraints?: string[];
    mounts?: Mount[];
    user?: string;
    groups?: string[];
    args?: string[];
    ports?: PortConfig[];
    readOnly?: boolean;
    alias?: string;
    sysctls?: Record<string, string>;
  },
): Spec {
  return {
    Name: `${STACK}-${name}`,
    Labels: { [LABEL_STACK]: STACK, 'agenthost.part': name },
    TaskTemplate: {
      ContainerSpec: {
        Image: p.image,
        ...(p.args ? { Args: p.args } : {}),
        Env: envList(p.env ?? {}),
        Labels: { [LABEL_STACK]: STACK, 'agenthost.part': name },
        ...(p.user ? { User: p.user } : {}),
        ...(p.groups ? { Groups: p.groups } : {}),
        ...hardened,
        ReadOnly: p.readOnly ?? true,
        Mounts: [...hardened.Mounts, ...(p.mounts ?? [])],
        Secrets: p.secrets ?? [],
        Healthcheck: health(p.healthTest, 60, p.healthPatience),
        ...(p.sysctls ? { Sysctls: p.sysctls } : {}),
      } as unknown as Docker.ContainerSpec,
      Resources: p.res,
      RestartPolicy: { Condition: 'any', Delay: 1_000_000_000, MaxAttempts: 0 },
      Placement: { Constraints: p.constraints ?? [], Preferences: [{ Spread: { SpreadDescriptor: 'node.id' } }] },
      Networks: [{ Target: NETWORK, Aliases: [p.alias ?? name] }],
      LogDriver: { Name: 'json-file', Options: { 'max-size': '10m', 'max-file': '3' } },
    },
    Mode: p.global ? { Global: {} } : { Replicated: { Replicas: p.replicas ?? 1 } },
    ...rolling(p.order ?? 'start-first'),
    // dnsrr: the name resolves to every task's address (VIPs need IPVS, which this kernel may lack).
    EndpointSpec: { Mode: 'dnsrr', ...(p.ports ? { Ports: p.ports } : {}) },
  } as Spec;
}

/**
 * What every agenthost service is given: its NATS identity, its own database role, a health port, and its
 * operator port (/metrics) on the overlay only (published nowhere): a Prometheus attached to the overlay scrapes
 * every task by DNS (deploy/observability/prometheus-swarm.yml).
 */
function serviceEnv(o: StackOptions, svc: ConfiguredPart, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...busEnv,
    NATS_STREAM_REPLICAS: '3',
    DATABASE_URL_FILE: `${SECRET_DIR}/database-url`,
    HEALTH_PORT: String(HEALTH_PORT),
    METRICS_PORT: String(METRICS_PORT),
    METRICS_HOST: '0.0.0.0',
    INSTANCE_NAME: `${svc}.{{.Task.Slot}}`,
    ...extra,
    // Of the operator's settings, only those this service reads (service-env.ts).
    ...ownEnv(svc, o.env),
  };
}

/** A task's NATS identity (its own nkey seed) and the CA of the NATS servers. */
const busEnv = { NATS_URL: NATS_CLIENT_URL, NATS_NKEY_SEED_FILE: `${SECRET_DIR}/nats-seed`, NATS_CA_FILE: `${SECRET_DIR}/nats-ca.pem` };
const busSecrets = (o: StackOptions, svc: string) => [secret(o, `nats-seed-${svc}`, SERVICE_UID, 'nats-seed'), secret(o, 'nats-ca.pem')];

const serviceSecrets = (o: StackOptions, svc: string, more: ReturnType<typeof secret>[] = []) => [
  ...busSecrets(o, svc),
  secret(o, `database-url-${svc}`, SERVICE_UID, 'database-url'),
  ...more,
];

export function stackSpecs(o: StackOptions): Spec[] {
  const specs: Spec[] = [];
  for (const node of NATS_NODES) {
    specs.push(
      service(node, {
        image: o.images.nats,
        args: ['-c', `${SECRET_DIR}/nats.conf`],
        secrets: [
          secret(o, `${node}.conf`, '10200', 'nats.conf'),
          secret(o, 'nats-cert.pem', '10200'),
          secret(o, 'nats-key.pem', '10200'),
          secret(o, 'nats-ca.pem', '10200'),
        ],
        mounts: [{ Type: 'volume', Source: `${STACK}-${node}`, Target: '/data' }],
        // Liveness with JetStream on, not cluster health: a task's name resolves only once it is healthy, so
        // requiring the routes (found by those names) first would never let a cluster form.
        healthTest: ['CMD', 'curl', '-fsS', '-o', '/dev/null', 'http://127.0.0.1:8222/healthz?js-enabled-only=true'],
        res: resources(64, 0.05, 512, 1),
        // One server per name and store: the old task stops before the new one starts.
        order: 'stop-first',
        constraints: o.natsNodes[node] ? [pinTo(o.natsNodes[node])] : [],
      }),
    );
  }
  if (o.postgres) {
    const schemas = [...new Set(Object.values(SCHEMAS))];
    specs.push(
      service('postgres', {
        image: o.images.postgres,
        env: { POSTGRES_PASSWORD_FILE: `${SECRET_DIR}/pg-admin`, PG_SCHEMAS: schemas.join(' ') },
        secrets: [secret(o, 'pg-admin', '10300'), ...schemas.map((s) => secret(o, `pg-${s}`, '10300'))],
        mounts: [{ Type: 'volume', Source: `${STACK}-postgres`, Target: '/var/lib/postgresql/data' }],
        healthTest: ['CMD', '/usr/bin/pg_isready', '-q', '-h', '/tmp', '-U', 'agenthost', '-d', 'agenthost'],
        // An unhealthy task leaves the service's DNS name at once and is restarted: for the one database that is an
        // outage of every service (ENOTFOUND, then its restart). Its check, a process the engine starts, ran past 4 s
        // three times in a row on a busy 2-core node in the swarm suite's chaos, and the swarm stopped a working
        // Postgres. So it is unhealthy only after six failing checks in a row (30-90 s); a dead one exits and is
        // restarted at once anyway.
        healthPatience: { timeoutSeconds: 10, retries: 6 },
        res: resources(256, 0.2, 1024, 1.5),
        order: 'stop-first',
        // Its volume lives on one node: the operator picks it with a node label.
        constraints: ['node.labels.agenthost.postgres == true'],
      }),
    );
  }
  if (!o.solanaRpcUrl) {
    specs.push(
      service('devchain', {
        image: o.images.devchain,
        env: { DEVCHAIN_HOST: '0.0.0.0', DEVCHAIN_PORT: '8899' },
        healthTest: [
          'CMD',
          '/usr/local/bin/node',
          '-e',
          'fetch(\'http://127.0.0.1:8899\',{method:\'POST\',headers:{\'content-type\':\'application/json\'},body:\'{"jsonrpc":"2.0","id":1,"method":"getHealth"}\',signal:AbortSignal.timeout(3000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))',
        ],
        res: resources(96, 0.05, 384, 1),
        order: 'stop-first',
        // Wallets send their transactions here: on a manager, whose address the operator knows.
        constraints: ['node.role == manager'],
        ports: [
          { Protocol: 'tcp', TargetPort: 8899, PublishedPort: o.devchainPort, PublishMode: 'host' },
          { Protocol: 'tcp', TargetPort: 8900, PublishedPort: o.devchainPort + 1, PublishMode: 'host' },
        ],
      }),
    );
  }
  const rpc = o.solanaRpcUrl ?? 'http://devchain:8899';
  const backend = (svc: 'auth' | 'billing-chain' | 'keyvault' | 'provisioner', p: Partial<Parameters<typeof service>[1]> & { env?: Record<string, string> }) =>
    service(svc, {
      image: o.images[svc],
      replicas: o.replicas[svc],
      healthTest: healthCheckCommand(HEALTH_PORT),
      res: resources(96, 0.05, 512, 1),
      ...p,
      env: serviceEnv(o, svc, p.env),
      secrets: serviceSecrets(o, svc, p.secrets),
    });
  // The edge's domain and port: auth signs users in for the dashboard's origin (unless the operator sets SIWS_DOMAIN).
  const authEnv = { AUTH_JWT_PRIVATE_KEY_FILE: `${SECRET_DIR}/auth-jwt.pem`, EDGE_DOMAIN: o.edgeDomain, EDGE_HTTPS_PORT: String(o.edgePorts.https) };
  specs.push(backend('auth', { env: authEnv, secrets: [secret(o, 'auth-jwt.pem')] }));
  specs.push(
    backend('billing-chain', {
      env: { SOLANA_RPC_URL: rpc, BILLING_DATA_KEY_FILE: `${SECRET_DIR}/billing-data-key` },
      secrets: [secret(o, 'billing-data-key')],
    }),
  );
  specs.push(
    backend('keyvault', {
      env: { MASTER_KEY_ENCRYPTION_FILE: `${SECRET_DIR}/master-key`, KEYVAULT_SEAL_PRIVATE_KEY_FILE: `${SECRET_DIR}/keyvault-seal.pem` },
      secrets: [secret(o, 'master-key'), secret(o, 'keyvault-seal.pem')],
    }),
  );
  specs.push(
    backend('provisioner', {
      env: {
        PROVISIONER_DRIVER: 'swarm',
        DOCKER_HOST: 'unix:///var/run/docker.sock',
        // Every node's edge serves the API to instances on a port of its own: an instance reaches it on its node's address.
        INSTANCE_GATEWAY_URL: `http://{host}:${o.edgePorts.instances}/api`,
        // The same https address through every node's edge, wherever the instance runs.
        INSTANCE_URL_TEMPLATE: `https://{id}.${o.edgeDomain}${o.edgePorts.https === 443 ? '' : `:${o.edgePorts.https}`}`,
        SWARM_JANITOR_IMAGE: o.images.provisioner,
        // The loop-mounted size-limited volumes are the docker driver's (docs/deploy/swarm.md). The host firewall of the instance
        // bridge is installed on each node by the job that prepares it (services/provisioner/src/swarm/node-setup.ts).
        VOLUME_QUOTA: 'off',
        FIREWALL: 'enforce',
        BACKUP_KEY_FILE: `${SECRET_DIR}/backup-key`,
        BACKUP_DIR: BACKUP_DIR,
      },
      secrets: [secret(o, 'backup-key')],
      // It drives the swarm through a manager's Engine API (the socket's group, not root). Its replicas share the
      // backup archives in a volume of the manager they run on (several managers: put shared storage there).
      groups: [o.dockerGid],
      mounts: [
        { Type: 'bind', Source: '/var/run/docker.sock', Target: '/var/run/docker.sock' },
        { Type: 'volume', Source: `${STACK}-backups`, Target: BACKUP_DIR },
      ],
      constraints: ['node.role == manager'],
    }),
  );
  specs.push(
    service('gateway', {
      image: o.images.gateway,
      replicas: o.replicas.gateway,
      env: serviceEnv(o, 'gateway', {
        GATEWAY_PORT: '8080',
        // A stopping replica answers for 3 s more (each answer closing its connection): the edges' DNS of the gateway
        // tasks refreshes every second, so no request meets a replica that already stopped listening.
        SHUTDOWN_GRACE_MS: '3000',
        TRUSTED_PROXIES: SUBNET,
        GATEWAY_ASSERTION_PRIVATE_KEY_FILE: `${SECRET_DIR}/gateway-assertion.pem`,
      }),
      secrets: serviceSecrets(o, 'gateway', [secret(o, 'gateway-assertion.pem')]),
      healthTest: httpHealthCheck(8080, '/api/health/live'),
      res: resources(128, 0.1, 512, 1),
    }),
  );
  specs.push(
    edgeSpec(o, {
      build: (name, p) => service(name, p as Parameters<typeof service>[1]),
      env: { ...busEnv, HEALTH_PORT: String(HEALTH_PORT) },
      secrets: [...busSecrets(o, 'edge'), secret(o, 'edge-intermediate.crt'), secret(o, 'edge-intermediate.key')],
      healthTest: healthCheckCommand(HEALTH_PORT),
      gatewaysDns: `tasks.${STACK}-gateway:8080`,
    }),
  );
  return specs;
}
