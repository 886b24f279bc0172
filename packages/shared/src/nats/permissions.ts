import * as contracts from '../contracts/index.ts';
import { pingSubject } from '../contracts/ping.ts';
import { EVENT_STREAM } from './events.ts';

/**
 * Who may say what on the bus: the one table from which deploy and the testkit generate nats-server's
 * authorization. Each service gets its own NATS user (an nkey) with exactly the subjects it serves,
 * calls, publishes and consumes; everything else is refused by the server. A service answers requests
 * through `allow_responses` (only to the reply subject of a message it received), and reads replies on
 * its own inbox prefix, so no service can read another's replies.
 */
export const SERVICES = ['gateway', 'auth', 'billing-chain', 'provisioner', 'keyvault', 'edge'] as const;
export type ServiceIdentity = (typeof SERVICES)[number];

/** Replies to a service's requests arrive under this prefix (nats.js `inboxPrefix`). */
export const inboxPrefixFor = (service: string): string => `_INBOX_${service.replaceAll('-', '_')}`;

const subjects = (...cs: Array<{ subject: string }>) => cs.map((c) => c.subject);
const { auth, billing, keys, keyvault: kv, provisioner: p } = contracts;

/** Subjects of the NATS services framework ($SRV.PING/INFO/STATS), served by every backend. */
const SRV = '$SRV.>';
const JS_INFO = ['$JS.API.INFO', `$JS.API.STREAM.INFO.${EVENT_STREAM}`];
/** A service that publishes events may create the stream and bring its settings up to date. */
const JS_STREAM_OWNER = [...JS_INFO, `$JS.API.STREAM.CREATE.${EVENT_STREAM}`, `$JS.API.STREAM.UPDATE.${EVENT_STREAM}`];

/** The JetStream API subjects of one durable pull consumer of the event stream, and its acks. */
function durableConsumer(durable: string): string[] {
  const s = EVENT_STREAM;
  return [
    `$JS.API.CONSUMER.INFO.${s}.${durable}`,
    `$JS.API.CONSUMER.CREATE.${s}.${durable}`,
    `$JS.API.CONSUMER.CREATE.${s}.${durable}.>`,
    `$JS.API.CONSUMER.DURABLE.CREATE.${s}.${durable}`,
    `$JS.API.CONSUMER.MSG.NEXT.${s}.${durable}`,
    `$JS.ACK.${s}.${durable}.>`,
  ];
}

/** The durable consumers, by the service that owns each. */
export const DURABLES = {
  keyvaultInstanceDeleted: 'keyvault-instance-deleted',
  provisionerSubscriptionChanges: 'provisioner-subscription-changes',
  // The gateway's webhook fan-out: one durable per event subject, shared by every replica (each event once).
  gatewayWebhooksInstanceCreated: 'gateway-webhooks-instance-created',
  gatewayWebhooksInstanceStatus: 'gateway-webhooks-instance-status',
  gatewayWebhooksInstanceDeleted: 'gateway-webhooks-instance-deleted',
  gatewayWebhooksSubscriptionChanged: 'gateway-webhooks-subscription-changed',
  gatewayWebhooksSubscriptionExpiring: 'gateway-webhooks-subscription-expiring',
  gatewayWebhooksKeysChanged: 'gateway-webhooks-keys-changed',
} as const;

const GATEWAY_WEBHOOK_DURABLES = Object.entries(DURABLES)
  .filter(([k]) => k.startsWith('gatewayWebhooks'))
  .map(([, v]) => v);

export interface Permissions {
  publish: string[];
  subscribe: string[];
}

const backends = ['auth', 'billing-chain', 'provisioner', 'keyvault'];

export const PERMISSIONS: Record<ServiceIdentity, Permissions> = {
  gateway: {
    publish: [
      ...subjects(auth.nonceCreate, auth.login, auth.jwks, auth.revoke, auth.revokedList),
      ...subjects(billing.register, billing.status, billing.refresh),
      ...subjects(kv.store, kv.update, kv.remove, kv.list, kv.retrieve, kv.audit),
      ...subjects(p.create, p.get, p.list, p.restart, p.stop, p.start, p.remove, p.logs, p.logsPage, p.usage, p.upgrade),
      ...subjects(p.backup, p.backups, p.restore, p.clone, p.removeBackup),
      ...subjects(contracts.devices.list, contracts.devices.decide),
      ...backends.map(pingSubject),
      // Replicas hand back each other's idle quota blocks.
      'gateway.usage.release',
      // Key hot reload between replicas (the one that changed the keys, the one holding the instance's watch)
      // and its outcome as an event.
      `${keys.RELOAD_SUBJECT_PREFIX}.*`,
      `${keys.APPLIED_SUBJECT_PREFIX}.*`,
      keys.keysChanged.subject,
      // GET /instance/events reads the stream message by message (no consumer: it cannot touch another's durable).
      `$JS.API.STREAM.INFO.${EVENT_STREAM}`,
      `$JS.API.STREAM.MSG.GET.${EVENT_STREAM}`,
      // Outbound webhooks: the gateway's own durable consumers of the events it delivers.
      '$JS.API.INFO',
      ...GATEWAY_WEBHOOK_DURABLES.flatMap(durableConsumer),
    ],
    subscribe: [
      `${inboxPrefixFor('gateway')}.>`,
      'gateway.usage.release',
      `${keys.RELOAD_SUBJECT_PREFIX}.*`,
      `${keys.APPLIED_SUBJECT_PREFIX}.*`,
      // Logouts, applied by every replica.
      auth.TOKEN_REVOKED_SUBJECT,
      // Cache invalidation only: what these events say is never taken as a grant.
      billing.subscriptionChanged.subject,
      p.instanceCreated.subject,
      p.instanceDeleted.subject,
      // Wakes GET /instance/wait and the event streams (one subscription per replica).
      p.instanceStatusChanged.subject,
    ],
  },
  auth: {
    publish: [auth.TOKEN_REVOKED_SUBJECT],
    subscribe: ['auth.v1.>', SRV],
  },
  'billing-chain': {
    publish: [billing.subscriptionChanged.subject, billing.subscriptionExpiring.subject, ...JS_STREAM_OWNER],
    subscribe: ['billing.v1.>', pingSubject('billing-chain'), SRV, `${inboxPrefixFor('billing-chain')}.>`, billing.subscriptionChanged.subject],
  },
  provisioner: {
    publish: [
      kv.issueCredentials.subject,
      kv.purgeInstance.subject,
      // Subscription events are re-read from their owner before instances are stopped.
      billing.status.subject,
      p.instanceCreated.subject,
      p.instanceDeleted.subject,
      p.instanceStatusChanged.subject,
      p.instanceBackup.subject,
      // Swarm: live CPU and memory of instances, from the edge of the node each runs on.
      `${contracts.edge.NODE_STATS_PREFIX}.*`,
      ...JS_STREAM_OWNER,
      ...durableConsumer(DURABLES.provisionerSubscriptionChanges),
    ],
    subscribe: ['provisioner.v1.>', SRV, `${inboxPrefixFor('provisioner')}.>`],
  },
  // The edge's route keeper (services/edge, beside Caddy): reads the route table and hears instance events as
  // hints, reports which instances had traffic and wakes sleeping ones. It serves its ping and, on a swarm, its
  // node's container stats.
  edge: {
    publish: [p.routes.subject, p.activity.subject, p.wake.subject],
    subscribe: [
      pingSubject('edge'),
      SRV,
      `${inboxPrefixFor('edge')}.>`,
      p.instanceCreated.subject,
      p.instanceStatusChanged.subject,
      p.instanceDeleted.subject,
      `${contracts.edge.NODE_STATS_PREFIX}.*`,
    ],
  },
  keyvault: {
    publish: [...JS_INFO, `$JS.API.STREAM.CREATE.${EVENT_STREAM}`, ...durableConsumer(DURABLES.keyvaultInstanceDeleted)],
    subscribe: ['keyvault.v1.>', SRV, `${inboxPrefixFor('keyvault')}.>`],
  },
};

export interface NatsUser {
  /** The user's nkey (public key, "U..."); the seed stays with the service. */
  nkey: string;
  /** Omitted for the operator, who may use every subject. */
  permissions?: Permissions;
}

/**
 * nats-server's configuration (JSON, which its config parser reads) for JetStream, TLS and one user
 * per service plus an operator. Clients must present a certificate-verified TLS connection and an nkey.
 */
export function natsServerConfig(opts: {
  host: string;
  port: number;
  storeDir: string;
  tls: { cert: string; key: string };
  users: NatsUser[];
  /** Extra top-level settings (e.g. a cluster block on the swarm). */
  extra?: Record<string, unknown>;
}): string {
  const users = opts.users.map((u) =>
    u.permissions
      ? {
          nkey: u.nkey,
          permissions: {
            publish: { allow: u.permissions.publish.length ? u.permissions.publish : ['_AGENTHOST_NOTHING'] },
            subscribe: { allow: u.permissions.subscribe },
            allow_responses: true,
          },
        }
      : { nkey: u.nkey },
  );
  const cfg = {
    host: opts.host,
    port: opts.port,
    jetstream: { store_dir: opts.storeDir },
    tls: { cert_file: opts.tls.cert, key_file: opts.tls.key, timeout: 5 },
    authorization: { users },
    ...opts.extra,
  };
  return `${JSON.stringify(cfg, null, 2)}\n`;
}
