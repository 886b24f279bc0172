import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ensureNatsTls, makeCa, natsServerConfig, natsUsers, rawPublicKey, SERVICES } from '@agenthost/shared';
import { ensureEdgeIntermediate } from './edge-ca.ts';

/**
 * The secret material of a swarm deployment, made once on the manager in `dir` (root only) and kept, so
 * that running the deployment again changes no key, password or identity. Everything here becomes a swarm
 * secret (encrypted in the managers' Raft log, given only to the tasks that name it, in memory on their node).
 */

/** The Postgres schema each service owns (as deploy/env.sh's SERVICE_SCHEMAS). */
export const SCHEMAS: Record<string, string> = {
  gateway: 'gateway',
  auth: 'auth',
  'billing-chain': 'billing',
  provisioner: 'provisioner',
  keyvault: 'keyvault',
};

export const NATS_NODES = ['nats-1', 'nats-2', 'nats-3'];
export const NATS_CLIENT_URL = NATS_NODES.map((n) => `nats://${n}:4222`).join(',');
/** Where the tasks find their secrets (the swarm's default secret directory). */
export const SECRET_DIR = '/run/secrets';

function kept(dir: string, name: string, make: () => string): string {
  const file = path.join(dir, name);
  if (!existsSync(file)) writeFileSync(file, make(), { mode: 0o600 });
  return readFileSync(file, 'utf8');
}

const password = () => randomBytes(24).toString('base64url');

export interface Material {
  /** Secret name → content. */
  secrets: Record<string, string>;
}

export interface MaterialOptions {
  dir: string;
  /** An external database for every service (then no Postgres service and no per-service roles). */
  databaseUrl?: string;
  /** The edges' domain: their issuing certificate may sign names under it and no other. */
  edgeDomain: string;
}

export function ensureMaterial(opts: MaterialOptions): Material {
  const { dir } = opts;
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o700);
  const secrets: Record<string, string> = {};
  secrets['master-key'] = kept(dir, 'master-key', () => randomBytes(32).toString('base64'));
  // The provisioner's alone: every backup archive is encrypted under a key derived from it.
  secrets['backup-key'] = kept(dir, 'backup-key', () => randomBytes(32).toString('base64'));
  // billing-chain's alone: it seals the keeper's Solana key in the billing schema.
  secrets['billing-data-key'] = kept(dir, 'billing-data-key', () => randomBytes(32).toString('base64'));
  secrets['auth-jwt.pem'] = kept(dir, 'auth-jwt.pem', () => generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
  // The gateway's assertion key and keyvault's seal key; their public halves are plain settings (busPublicKeys).
  secrets['gateway-assertion.pem'] = kept(dir, 'gateway-assertion.pem', () =>
    generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  );
  secrets['keyvault-seal.pem'] = kept(dir, 'keyvault-seal.pem', () =>
    generateKeyPairSync('x25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  );

  if (opts.databaseUrl) {
    for (const svc of Object.keys(SCHEMAS)) secrets[`database-url-${svc}`] = opts.databaseUrl;
  } else {
    secrets['pg-admin'] = kept(dir, 'pg-admin', password);
    for (const [svc, schema] of Object.entries(SCHEMAS)) {
      secrets[`pg-${schema}`] = kept(dir, `pg-${schema}`, password);
      secrets[`database-url-${svc}`] = `postgres://agenthost_${schema}:${secrets[`pg-${schema}`]}@postgres:5432/agenthost`;
    }
  }

  // The edge's CA: every node's edge issues its certificates under this one root, so a client that trusts it (the
  // file edge-ca.crt here) is served by any node. Made once and kept, like every key here. Its key stays here, with
  // the operator: the edges sign with an intermediate (edge-ca.ts), so a compromised edge leaks no root.
  if (!existsSync(path.join(dir, 'edge-ca.key'))) makeEdgeCa(dir);
  Object.assign(secrets, ensureEdgeIntermediate(dir, opts.edgeDomain));

  // NATS: one nkey per service (and the operator's, for tools), a CA and a certificate for every node name,
  // and a route password, so that only our nodes join the cluster.
  const natsDir = path.join(dir, 'nats');
  const { seeds, users } = natsUsers(natsDir);
  for (const who of [...SERVICES, 'operator']) secrets[`nats-seed-${who}`] = readFileSync(seeds[who]!, 'utf8');
  const tls = ensureNatsTls(path.join(natsDir, 'tls'), ['nats', ...NATS_NODES]);
  secrets['nats-ca.pem'] = readFileSync(tls.ca, 'utf8');
  secrets['nats-cert.pem'] = readFileSync(tls.cert, 'utf8');
  secrets['nats-key.pem'] = readFileSync(tls.key, 'utf8');
  const routePassword = kept(dir, 'nats-route', password);
  for (const node of NATS_NODES) {
    secrets[`${node}.conf`] = natsServerConfig({
      host: '0.0.0.0',
      port: 4222,
      storeDir: '/data/jetstream',
      tls: { cert: `${SECRET_DIR}/nats-cert.pem`, key: `${SECRET_DIR}/nats-key.pem` },
      users,
      extra: {
        server_name: node,
        http: '127.0.0.1:8222',
        cluster: {
          name: 'agenthost',
          host: '0.0.0.0',
          port: 6222,
          // Clients use only the URLs they were given (the certificate names), not the nodes' task addresses.
          no_advertise: true,
          authorization: { user: 'route', password: routePassword },
          tls: { cert_file: `${SECRET_DIR}/nats-cert.pem`, key_file: `${SECRET_DIR}/nats-key.pem`, ca_file: `${SECRET_DIR}/nats-ca.pem`, timeout: 5 },
          routes: NATS_NODES.filter((n) => n !== node).map((n) => `nats-route://route:${routePassword}@${n}:6222`),
        },
      },
    });
  }
  return { secrets };
}

/** The public halves of the gateway's assertion key and keyvault's seal key, as the services are configured with them. */
export function busPublicKeys(secrets: Record<string, string>): { GATEWAY_ASSERTION_PUBLIC_KEYS: string; KEYVAULT_SEAL_PUBLIC_KEY: string } {
  const raw = (pem: string) => rawPublicKey(createPublicKey(createPrivateKey(pem)));
  return { GATEWAY_ASSERTION_PUBLIC_KEYS: raw(secrets['gateway-assertion.pem']!), KEYVAULT_SEAL_PUBLIC_KEY: raw(secrets['keyvault-seal.pem']!) };
}

/** The edges' root CA, made aside and renamed into place (a half-made key is never taken for the CA). */
function makeEdgeCa(dir: string): void {
  makeCa(dir, { subject: '/CN=agenthost edge root', cert: 'edge-ca.crt', key: 'edge-ca.key.new' });
  renameSync(path.join(dir, 'edge-ca.key.new'), path.join(dir, 'edge-ca.key'));
}
