import { SECRET_DIR } from './material.ts';
import { ownEnv } from './service-env.ts';
import { resources } from './service-parts.ts';

/** The edge's ports on every node (host mode: published on the node's own addresses). */
export interface EdgePorts {
  /** Users: HTTPS, the API at https://<domain>/api and every instance at https://<id>.<domain>. */
  https: number;
  /** Users: plain HTTP, redirected to HTTPS. */
  http: number;
  /** Instances only (never open to users): plain HTTP, the whole API, the routes only instances call included. */
  instances: number;
}

/**
 * The edge on every node: Caddy and its route keeper in one task (services/edge/src/swarm.ts), with the single
 * host's configuration. Every node's edge answers for every instance (the keeper asks the provisioner where each runs)
 * and issues its certificates under the deployment's one root (with an intermediate, a swarm secret), so a URL works through any node and
 * stays the same when its instance moves. `common` is what stack.ts gives every service: its spec builder, NATS
 * identity, health check and the gateways' DNS name.
 */
export function edgeSpec<S>(
  o: { images: { edge: string }; env: Record<string, string>; edgeDomain: string; edgePorts: EdgePorts },
  common: {
    build: (name: string, p: Record<string, unknown>) => S;
    env: Record<string, string>;
    secrets: unknown[];
    healthTest: string[];
    gatewaysDns: string;
  },
): S {
  const p = o.edgePorts;
  const low = Math.min(p.https, p.http, p.instances) < 1024;
  return common.build('edge', {
    image: o.images.edge,
    global: true,
    env: {
      ...common.env,
      INSTANCE_NAME: 'edge.{{.Node.Hostname}}',
      EDGE_DOMAIN: o.edgeDomain,
      EDGE_HTTPS_PORT: String(p.https),
      EDGE_HTTP_PORT: String(p.http),
      EDGE_INSTANCE_PORT: String(p.instances),
      EDGE_GATEWAYS_DNS: common.gatewaysDns,
      // Caddy's certificates and the keeper's socket: in the task's /tmp (memory), made again by each task.
      EDGE_DATA_DIR: '/tmp/edge/caddy',
      EDGE_ADMIN_SOCKET: '/tmp/edge/admin.sock',
      EDGE_KEEPER_SOCKET: '/tmp/edge/keeper.sock',
      // The intermediate it signs with (edge-ca.ts); the root's key stays with the operator.
      EDGE_CA_INTERMEDIATE_CERT_FILE: `${SECRET_DIR}/edge-intermediate.crt`,
      EDGE_CA_INTERMEDIATE_KEY_FILE: `${SECRET_DIR}/edge-intermediate.key`,
      // Its node's container stats for the provisioner (services/edge/src/node-stats.ts), read from the host's cgroups.
      EDGE_NODE_ID: '{{.Node.ID}}',
      EDGE_CGROUP_ROOT: '/host/cgroup',
      ...ownEnv('edge', o.env),
    },
    mounts: [{ Type: 'bind', Source: '/sys/fs/cgroup', Target: '/host/cgroup', ReadOnly: true }],
    secrets: common.secrets,
    healthTest: common.healthTest,
    res: resources(64, 0.05, 384, 1),
    // Its host ports are taken until the old task stops: one node at a time, stop first.
    order: 'stop-first',
    // Ports below 1024 without a capability: the container's own network namespace lets its user bind them.
    ...(low ? { sysctls: { 'net.ipv4.ip_unprivileged_port_start': '0' } } : {}),
    ports: [p.https, p.http, p.instances].map((port) => ({ Protocol: 'tcp', TargetPort: port, PublishedPort: port, PublishMode: 'host' })),
  });
}
