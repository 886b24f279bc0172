import { execFileSync, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, describe, expect, it } from 'vitest';
import { edgeBaseConfig, freePort, requestVia, waitFor } from '@agenthost/testkit';
import { ensureMaterial } from '../src/material.ts';
import { allowedNames, type ConfiguredPart } from '../src/service-env.ts';
import { stackSpecs, type StackOptions } from '../src/stack.ts';

// The stack's specs and the edges' CA as deploy/swarm/src/cli.ts makes them, without a swarm: what each task is given
// (its environment, its secrets, its published ports) and the certificates a client meets at an edge (a real Caddy).

const dir = mkdtempSync(path.join(os.tmpdir(), 'agenthost-stack-parts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const DOMAIN = 'agenthost.localhost';
const material = ensureMaterial({ dir, edgeDomain: DOMAIN });
// The operator's agenthost.env: one setting every service reads, and settings of one service each.
const operator = {
  LOG_LEVEL: 'debug',
  MASTER_KEY_ID: 'k2',
  BACKUP_S3_SECRET_ACCESS_KEY: 'secret-s3',
  FRAMEWORK_IMAGES: '{}',
  EDGE_BODY_LIMIT_BYTES: '1000',
  TIER_LIMITS_JSON: '{}',
};
const specs = stackSpecs({
  images: new Proxy({}, { get: () => `sha256:${'0'.repeat(64)}` }) as StackOptions['images'],
  replicas: { gateway: 2, auth: 2, 'billing-chain': 1, provisioner: 2, keyvault: 2 },
  secrets: Object.fromEntries(Object.keys(material.secrets).map((k) => [k, { id: `id-${k}`, name: `agenthost-${k}` }])),
  edgePorts: { https: 443, http: 80, instances: 8080 },
  edgeDomain: DOMAIN,
  env: operator,
  postgres: true,
  devchainPort: 8899,
  dockerGid: '999',
  natsNodes: {},
});
type Container = { Env: string[]; Secrets: { SecretName: string; File: { Name: string } }[] };
const task = (part: string) => (specs.find((s) => s.Name === `agenthost-${part}`)!.TaskTemplate as { ContainerSpec: unknown }).ContainerSpec as Container;
const envOf = (part: string) => Object.fromEntries(task(part).Env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
const PARTS: ConfiguredPart[] = ['gateway', 'auth', 'billing-chain', 'provisioner', 'keyvault', 'edge'];

describe('the swarm stack as built for each service', () => {
  it("gives each service only the settings its configuration reads, and only files of its own secrets, of the operator's file too", () => {
    for (const part of PARTS) {
      const env = envOf(part);
      expect(
        Object.keys(env).filter((n) => !allowedNames(part).has(n)),
        part,
      ).toEqual([]);
      const own = new Set(task(part).Secrets.map((s) => `/run/secrets/${s.File.Name}`));
      expect(
        Object.values(env).filter((v) => v.startsWith('/run/secrets/') && !own.has(v)),
        part,
      ).toEqual([]);
      expect(env.LOG_LEVEL, part).toBe('debug');
    }
    const holders = (name: string) => PARTS.filter((p) => name in envOf(p));
    expect(holders('MASTER_KEY_ID')).toEqual(['keyvault']);
    expect(holders('BACKUP_S3_SECRET_ACCESS_KEY')).toEqual(['provisioner']);
    expect(holders('FRAMEWORK_IMAGES')).toEqual(['provisioner']);
    expect(holders('EDGE_BODY_LIMIT_BYTES')).toEqual(['edge']);
    expect(holders('TIER_LIMITS_JSON')).toEqual(['gateway', 'provisioner']);
  });

  it('publishes the edge (HTTPS, HTTP, the instance port) and devchain on the nodes, and no other part: the gateway is on the overlay only', () => {
    const published = specs.flatMap((s) => (s.EndpointSpec?.Ports ?? []).map((p) => `${s.Name}:${p.PublishedPort}`));
    expect(published.sort()).toEqual(['agenthost-devchain:8899', 'agenthost-devchain:8900', 'agenthost-edge:443', 'agenthost-edge:80', 'agenthost-edge:8080']);
  });

  it("gives the edge an intermediate limited to the domain, never the root's key", () => {
    const rootKey = readFileSync(path.join(dir, 'edge-ca.key'), 'utf8');
    expect(Object.entries(material.secrets).filter(([, v]) => v === rootKey)).toEqual([]);
    const edgeSecrets = task('edge').Secrets.map((s) => s.SecretName);
    expect(edgeSecrets.filter((s) => s.includes('edge-'))).toEqual(['agenthost-edge-intermediate.crt', 'agenthost-edge-intermediate.key']);
    const inter = new X509Certificate(material.secrets['edge-intermediate.crt']!);
    expect(inter.checkIssued(new X509Certificate(readFileSync(path.join(dir, 'edge-ca.crt'))))).toBe(true);
    // A leaked intermediate signs no name outside the domain that a client accepts.
    const verify = (name: string) => {
      const f = (n: string) => path.join(dir, n);
      writeFileSync(f('inter.key'), material.secrets['edge-intermediate.key']!);
      writeFileSync(f('inter.crt'), material.secrets['edge-intermediate.crt']!);
      execFileSync(
        'openssl',
        [
          'req',
          '-new',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-subj',
          `/CN=${name}`,
          '-keyout',
          f('l.key'),
          '-out',
          f('l.csr'),
        ],
        { stdio: 'ignore' },
      );
      writeFileSync(f('l.ext'), `subjectAltName=DNS:${name}\n`);
      execFileSync(
        'openssl',
        [
          'x509',
          '-req',
          '-in',
          f('l.csr'),
          '-CA',
          f('inter.crt'),
          '-CAkey',
          f('inter.key'),
          '-set_serial',
          '7',
          '-days',
          '1',
          '-extfile',
          f('l.ext'),
          '-out',
          f('l.crt'),
        ],
        { stdio: 'ignore' },
      );
      try {
        execFileSync('openssl', ['verify', '-CAfile', f('edge-ca.crt'), '-untrusted', f('inter.crt'), f('l.crt')], { stdio: 'ignore' });
        return true;
      } catch {
        return false;
      }
    };
    expect([verify(`inst-1.${DOMAIN}`), verify('bank.example.com')]).toEqual([true, false]);
  });

  it('an edge with those files serves HTTPS that a client trusting the root accepts, and holds no key of that root', async () => {
    const https = await freePort();
    const files = Object.fromEntries(['edge-intermediate.crt', 'edge-intermediate.key'].map((n) => [n, path.join(dir, 'secrets', n)]));
    execFileSync('mkdir', ['-p', path.join(dir, 'secrets')]);
    for (const [n, f] of Object.entries(files)) writeFileSync(f, material.secrets[n]!, { mode: 0o600 });
    const data = path.join(dir, 'caddy');
    const config = await edgeBaseConfig({
      EDGE_DOMAIN: DOMAIN,
      EDGE_HTTPS_PORT: String(https),
      EDGE_HTTP_PORT: String(await freePort()),
      EDGE_BIND: '127.0.0.1',
      EDGE_ADMIN_SOCKET: path.join(dir, 'admin.sock'),
      EDGE_DATA_DIR: data,
      EDGE_CA_INTERMEDIATE_CERT_FILE: files['edge-intermediate.crt']!,
      EDGE_CA_INTERMEDIATE_KEY_FILE: files['edge-intermediate.key']!,
    });
    writeFileSync(path.join(dir, 'caddy.json'), config);
    const caddy = spawn('caddy', ['run', '--config', path.join(dir, 'caddy.json')], {
      env: { PATH: process.env.PATH ?? '', HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir },
      stdio: 'ignore',
    });
    try {
      const root = readFileSync(path.join(dir, 'edge-ca.crt'), 'utf8');
      const r = await waitFor(
        'the edge over HTTPS',
        () => requestVia(`https://${DOMAIN}:${https}/api/health/live`, { address: '127.0.0.1', ca: root, timeoutMs: 5000 }).catch(() => undefined),
        30_000,
        300,
      );
      // No gateway here: the edge answers itself, over TLS the root vouches for.
      expect(r.status).toBe(503);
      const issuer = await new Promise<string>((resolve, reject) => {
        const s = tls.connect({ host: '127.0.0.1', port: https, servername: DOMAIN, ca: root }, () => {
          resolve(s.getPeerCertificate(true).issuerCertificate.subject.CN as string);
          s.end();
        });
        s.on('error', reject);
      });
      expect(issuer).toBe(`agenthost edge issuer for ${DOMAIN}`);
      // Caddy's own root in its data (it makes one when given none) is no key of the deployment's.
      const rootKey = readFileSync(path.join(dir, 'edge-ca.key'), 'utf8').trim();
      const keys = readdirSync(data, { recursive: true })
        .map(String)
        .filter((f) => f.endsWith('.key'));
      expect(keys.length).toBeGreaterThan(0);
      expect(keys.filter((f) => readFileSync(path.join(data, f), 'utf8').trim() === rootKey)).toEqual([]);
    } finally {
      caddy.kill('SIGTERM');
    }
  });
});
