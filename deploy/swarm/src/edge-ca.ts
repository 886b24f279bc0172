import { execFileSync } from 'node:child_process';
import { createPublicKey, randomBytes, X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The certificate the edges issue with: an intermediate under the deployment's root (edge-ca.crt), made here on the
 * manager with the root's key, which never leaves $AGENTHOST_STATE/swarm. Every edge task holds the intermediate's key
 * (a swarm secret), so a compromised edge can sign certificates until the intermediate expires, and only for names
 * under the edge domain (its name constraint: clients refuse anything else it signs); it cannot make another issuer
 * (path length 0). Caddy renews an intermediate it was given no more (it has no root key), so each `cli.ts up` issues
 * a new one when less than RENEW_DAYS are left, or when the domain changed; the edges roll onto it (a new secret).
 */

const VALID_DAYS = 365;
const RENEW_DAYS = 90;
const CERT = 'edge-intermediate.crt';
const KEY = 'edge-intermediate.key';

/** The subject names the domain, so a deploy under another domain issues anew. */
const subjectFor = (domain: string) => `CN=agenthost edge issuer for ${domain}`;

/** Whether the kept intermediate serves `domain` for RENEW_DAYS more, with its own key (a run stopped between the renames below has not). */
function current(dir: string, domain: string): boolean {
  if (!existsSync(path.join(dir, KEY)) || !existsSync(path.join(dir, CERT))) return false;
  const cert = new X509Certificate(readFileSync(path.join(dir, CERT)));
  const own = createPublicKey(readFileSync(path.join(dir, KEY))).equals(cert.publicKey);
  return own && cert.subject === subjectFor(domain) && Date.parse(cert.validTo) - Date.now() > RENEW_DAYS * 86_400_000;
}

/** The intermediate's certificate and key (secret name → PEM), issued when missing, expiring or for another domain. */
export function ensureEdgeIntermediate(dir: string, domain: string): Record<string, string> {
  if (!current(dir, domain)) issue(dir, domain);
  return { [CERT]: readFileSync(path.join(dir, CERT), 'utf8'), [KEY]: readFileSync(path.join(dir, KEY), 'utf8') };
}

function issue(dir: string, domain: string): void {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ext = path.join(dir, 'edge-intermediate.ext');
  writeFileSync(
    ext,
    [
      'basicConstraints=critical,CA:TRUE,pathlen:0',
      'keyUsage=critical,keyCertSign,cRLSign',
      `nameConstraints=critical,permitted;DNS:${domain}`,
      'subjectKeyIdentifier=hash',
      'authorityKeyIdentifier=keyid',
      '',
    ].join('\n'),
  );
  try {
    run([
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-subj',
      `/${subjectFor(domain)}`,
      '-keyout',
      `${KEY}.new`,
      '-out',
      'edge-intermediate.csr',
    ]);
    chmodSync(path.join(dir, `${KEY}.new`), 0o600);
    run(
      [
        'x509',
        '-req',
        '-in',
        'edge-intermediate.csr',
        '-CA',
        'edge-ca.crt',
        '-CAkey',
        'edge-ca.key',
        '-set_serial',
        `0x${randomBytes(16).toString('hex')}`,
        '-days',
        String(VALID_DAYS),
      ].concat(['-extfile', ext, '-out', `${CERT}.new`]),
    );
    renameSync(path.join(dir, `${KEY}.new`), path.join(dir, KEY));
    renameSync(path.join(dir, `${CERT}.new`), path.join(dir, CERT));
  } finally {
    for (const f of [ext, 'edge-intermediate.csr', `${KEY}.new`, `${CERT}.new`]) rmSync(path.join(dir, f), { force: true });
  }
}
