import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Deployment, freePort, startDeployment } from '../../packages/testkit/src/index.ts';

// What each process deploy/start.sh supervises holds in its environment (/proc/<pid>/environ, which its own user and
// root read): a database URL only where a database is used, never the admin's; no credential of another program. And
// the log folder, supervisord's own log included, is not readable by other users.

const run = promisify(execFile);
let deployment: Deployment | undefined;
let state: string;
let conf: string;
// The edge's ports in this suite (18630-18631: no other suite uses them).
const EDGE_HTTPS = 18630;

const supervisorctl = async (...args: string[]) => (await run('supervisorctl', ['-c', conf, ...args]).catch((e: { stdout: string }) => e)).stdout.trim();
/** The process supervisord started for a program (bash execs setpriv, env and the program in it: the same pid). */
const pidOf = async (program: string) => Number(await supervisorctl('pid', program));
const environ = async (program: string) =>
  readFileSync(`/proc/${await pidOf(program)}/environ`, 'utf8')
    .split('\0')
    .filter(Boolean);

const SERVICES = { gateway: 'gateway', auth: 'auth', 'billing-chain': 'billing', provisioner: 'provisioner', keyvault: 'keyvault' } as const;
const NO_DATABASE = ['caddy', 'edge', 'devchain', 'prometheus'];

beforeAll(async () => {
  deployment = await startDeployment('process-secrets', {
    env: {
      EDGE_HTTPS_PORT: String(EDGE_HTTPS),
      EDGE_HTTP_PORT: String(EDGE_HTTPS + 1),
      METRICS_PORT_BASE: String(await freePort()),
      PROMETHEUS_PORT: String(await freePort()),
    },
    // A backup bucket's credentials, so that the test can see they reach the provisioner alone.
    settings: [
      'FIREWALL=off',
      'BACKUP_S3_BUCKET=secrets-test',
      'BACKUP_S3_ACCESS_KEY_ID=AKIASECRETSTEST',
      'BACKUP_S3_SECRET_ACCESS_KEY=s3-secret-of-the-provisioner',
    ],
  });
  state = deployment.state;
  conf = path.join(state, 'supervisor', 'supervisord.conf');
}, 600_000);

afterAll(() => deployment?.stop(), 120_000);

describe('the environment of each supervised process', () => {
  it('holds no database URL where no database is used, and nowhere the admin’s', async () => {
    const admin = readFileSync(path.join(state, 'pg-password'), 'utf8').trim();
    const rolePasswords = Object.values(SERVICES).map((s) => readFileSync(path.join(state, 'secrets', `pg-${s}`), 'utf8').trim());
    for (const p of [...NO_DATABASE, ...Object.keys(SERVICES)]) {
      const vars = await environ(p);
      const text = vars.join('\n');
      expect(text.includes(admin), `${p} holds the admin's password`).toBe(false);
      expect(
        vars.filter((v) => v.startsWith('TEST_DATABASE_URL')),
        p,
      ).toEqual([]);
      const urls = [...text.matchAll(/postgres(?:ql)?:\/\/[^\s]*/g)].map((m) => new URL(m[0]));
      if (NO_DATABASE.includes(p)) {
        expect(
          urls.map((u) => u.username),
          p,
        ).toEqual([]);
        expect(
          vars.filter((v) => /^DATABASE_URL/.test(v)),
          p,
        ).toEqual([]);
        for (const pw of rolePasswords) expect(text.includes(pw), `${p} holds a role's password`).toBe(false);
      } else {
        // One URL: the service's own role's.
        expect(
          urls.map((u) => u.username),
          p,
        ).toEqual([`agenthost_${SERVICES[p as keyof typeof SERVICES]}`]);
      }
    }
  });

  it('holds no credential of another program: the Docker engine and the backup bucket are the provisioner’s, the data key billing-chain’s', async () => {
    const own: Record<string, string[]> = {
      provisioner: ['BACKUP_S3_ACCESS_KEY_ID', 'BACKUP_S3_SECRET_ACCESS_KEY', 'BACKUP_KEY_FILE'],
      'billing-chain': ['BILLING_DATA_KEY_FILE'],
      keyvault: ['MASTER_KEY_ENCRYPTION', 'KEYVAULT_SEAL_PRIVATE_KEY_FILE'],
      auth: ['AUTH_JWT_PRIVATE_KEY_FILE'],
      gateway: ['GATEWAY_ASSERTION_PRIVATE_KEY_FILE'],
    };
    const credentials = Object.values(own).flat();
    for (const p of [...NO_DATABASE, ...Object.keys(SERVICES)]) {
      const names = (await environ(p)).map((v) => v.slice(0, v.indexOf('=')));
      expect(
        names.filter((n) => credentials.includes(n) && !own[p]?.includes(n)),
        p,
      ).toEqual([]);
      expect(names.filter((n) => n === 'DOCKER_HOST' && p !== 'provisioner')).toEqual([]);
      if (p !== 'provisioner') expect((await environ(p)).join('\n').includes('s3-secret-of-the-provisioner'), p).toBe(false);
    }
    expect((await environ('provisioner')).includes('BACKUP_S3_SECRET_ACCESS_KEY=s3-secret-of-the-provisioner')).toBe(true);
    // Caddy, facing the internet, and devchain get nothing of infra.env or agenthost.env.
    for (const p of ['caddy', 'devchain']) {
      const names = (await environ(p)).map((v) => v.slice(0, v.indexOf('=')));
      expect(
        names.filter((n) => !/^(PATH|HOME|XDG_DATA_HOME|XDG_CONFIG_HOME|DEVCHAIN_\w+)$/.test(n)),
        p,
      ).toEqual([]);
    }
  });

  it('gives billing-chain the path of its data key, a file only its own user reads', async () => {
    const file = path.join(state, 'secrets', 'billing-data-key');
    expect((await environ('billing-chain')).find((v) => v.startsWith('BILLING_DATA_KEY'))).toBe(`BILLING_DATA_KEY_FILE=${file}`);
    expect(Buffer.from(readFileSync(file, 'utf8').trim(), 'base64')).toHaveLength(32);
    expect(statSync(file).mode & 0o077).toBe(0);
    expect((await run('stat', ['-c', '%U', file])).stdout.trim()).toBe('agenthost-billing-chain');
  });
});

describe('the log folder', () => {
  it('holds no file other users may read, supervisord’s own log included', async () => {
    const dir = path.join(state, 'log');
    const files = readdirSync(dir);
    expect(files).toContain('supervisord.log');
    for (const f of files) expect((statSync(path.join(dir, f)).mode & 0o007).toString(8), f).toBe('0');
  });
});
