import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { nkeys } from 'nats';
import { natsServerConfig, PERMISSIONS, SERVICES, type NatsUser } from './permissions.ts';

/**
 * Makes what a nats-server with least privilege needs: a CA and a server certificate (openssl), one nkey
 * seed per service and one for the operator, and the server's configuration. Used by deploy/infra.sh
 * (once per host; seeds and certificates are kept, the configuration is rewritten from the table) and by
 * the testkit (certificates once per run, seeds per suite). Seeds and keys are written 0600.
 */

export const OPERATOR = 'operator';

export interface NatsTls {
  ca: string;
  cert: string;
  key: string;
}

/** A CA and a server certificate for 127.0.0.1/localhost (plus `hosts`), made once in `dir` and reused. */
export function ensureNatsTls(dir: string, hosts: string[] = []): NatsTls {
  const out: NatsTls = { ca: path.join(dir, 'ca.pem'), cert: path.join(dir, 'server.pem'), key: path.join(dir, 'server-key.pem') };
  if (existsSync(out.ca) && existsSync(out.cert) && existsSync(out.key)) return out;
  const parent = path.dirname(dir);
  mkdirSync(parent, { recursive: true });
  // clientAuth too: NATS cluster routes are mutual TLS (each node presents this certificate to the others).
  // Made in a directory aside and renamed into place whole: processes that race to make it (parallel
  // test files) either win the rename or use the winner's, never a CA and a certificate of two makers.
  const tmp = mkdtempSync(path.join(parent, `.${path.basename(dir)}-`));
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: tmp, stdio: ['ignore', 'ignore', 'pipe'] });
  const san = ['DNS:localhost', 'IP:127.0.0.1', ...hosts.map((h) => (/^[\d.]+$/.test(h) ? `IP:${h}` : `DNS:${h}`))].join(',');
  makeCa(tmp, { subject: '/CN=agenthost NATS CA', cert: 'ca.pem', key: 'ca-key.pem' });
  ssl(
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-subj',
    '/CN=agenthost-nats',
    '-keyout',
    'server-key.pem',
    '-out',
    'server.csr',
  );
  writeFileSync(path.join(tmp, 'ext.cnf'), `subjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth\n`);
  ssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca-key.pem',
    '-CAcreateserial',
    '-days',
    '3650',
    '-extfile',
    'ext.cnf',
    '-out',
    'server.pem',
  );
  for (const f of ['ca-key.pem', 'server-key.pem']) chmodSync(path.join(tmp, f), 0o600);
  chmodSync(tmp, 0o700);
  try {
    renameSync(tmp, dir);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another process made it first
  }
  return out;
}

/**
 * A self-signed root CA (EC P-256, 10 years) in `dir`: its certificate and its key (0600). The one recipe for every CA
 * of a deployment: the NATS CA here, the swarm edges' root (deploy/swarm/src/material.ts).
 */
export function makeCa(dir: string, o: { subject: string; cert: string; key: string }): void {
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '3650', '-subj', o.subject]
      .concat(['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'])
      .concat(['-keyout', o.key, '-out', o.cert]),
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  chmodSync(path.join(dir, o.key), 0o600);
}

/** The seed file of one identity in `dir`, made when missing. Returns the user's public nkey. */
function ensureSeed(dir: string, who: string): { seedFile: string; nkey: string } {
  const seedFile = path.join(dir, `${who}.nk`);
  if (!existsSync(seedFile)) writeFileSync(seedFile, `${new TextDecoder().decode(nkeys.createUser().getSeed())}\n`, { mode: 0o600 });
  const nkey = nkeys.fromSeed(new TextEncoder().encode(readFileSync(seedFile, 'utf8').trim())).getPublicKey();
  return { seedFile, nkey };
}

export interface NatsAuth {
  configFile: string;
  tls: NatsTls;
  /** Seed file per service, and the operator's. */
  seeds: Record<string, string>;
}

/** The seed of every service and the operator in `dir` (made when missing, kept otherwise), and their server-side users. */
export function natsUsers(dir: string): { seeds: Record<string, string>; users: NatsUser[] } {
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o700);
  const seeds: Record<string, string> = {};
  const users: NatsUser[] = [];
  for (const who of [...SERVICES, OPERATOR]) {
    const { seedFile, nkey } = ensureSeed(dir, who);
    seeds[who] = seedFile;
    const permissions = who === OPERATOR ? undefined : PERMISSIONS[who as keyof typeof PERMISSIONS];
    users.push(permissions ? { nkey, permissions } : { nkey });
  }
  return { seeds, users };
}

/**
 * Seeds for every service and the operator in `dir`, and `dir`/nats.conf for a server on host:port with
 * JetStream in storeDir. Existing seeds are kept, so running it again changes no service's identity.
 */
export function writeNatsAuth(dir: string, opts: { host: string; port: number; storeDir: string; tls: NatsTls; extra?: Record<string, unknown> }): NatsAuth {
  const { seeds, users } = natsUsers(dir);
  const configFile = path.join(dir, 'nats.conf');
  const config = natsServerConfig({
    host: opts.host,
    port: opts.port,
    storeDir: opts.storeDir,
    tls: opts.tls,
    users,
    ...(opts.extra ? { extra: opts.extra } : {}),
  });
  writeFileSync(configFile, config, { mode: 0o600 });
  return { configFile, tls: opts.tls, seeds };
}
