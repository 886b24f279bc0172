import { execFile } from 'node:child_process';
import net from 'node:net';
import { readFileSync, readlinkSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Deployment, freePort, repoRoot, startDeployment, waitFor } from '../../packages/testkit/src/index.ts';

// deploy/start.sh as a newcomer runs it, in a state directory of its own and on free ports (sharing the
// Docker engine, the image cache and Node 24 with the test run): its processes run under supervisord,
// come back by themselves after SIGKILL, and each holds only its own secrets.

const run = promisify(execFile);
let deployment: Deployment | undefined;
let state: string;
let conf: string;
let env: NodeJS.ProcessEnv;
let gatewayPort: number;
let prometheusPort: number;
const EDGE_HTTPS = 18746;
const EDGE_MAX_CONNS = 24;

const supervisorctl = async (...args: string[]) => (await run('supervisorctl', ['-c', conf, ...args]).catch((e: { stdout: string }) => e)).stdout.trim();
const pidOf = async (program: string) => Number(await supervisorctl('pid', program));
const ready = async () => {
  const res = await fetch(`http://127.0.0.1:${gatewayPort}/api/health/ready`).catch(() => undefined);
  return res?.status === 200;
};
const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');

beforeAll(async () => {
  gatewayPort = await freePort();
  prometheusPort = await freePort();
  deployment = await startDeployment('supervised', {
    env: {
      GATEWAY_PORT: String(gatewayPort),
      // The edge's ports in this suite (the edge suites own 18740-18749).
      EDGE_HTTPS_PORT: String(EDGE_HTTPS),
      EDGE_HTTP_PORT: String(EDGE_HTTPS + 1),
      EDGE_MAX_CONNS_PER_CLIENT: String(EDGE_MAX_CONNS),
      // Operator ports and Prometheus on free ports, clear of a deployment running on this machine.
      METRICS_PORT_BASE: String(await freePort()),
      PROMETHEUS_PORT: String(prometheusPort),
    },
    // Its instances (none are made here) and its reconciler stay out of the other suites' way.
    settings: ['INSTANCE_SCOPE=deploytest', 'INSTANCE_NETWORK=agenthost-deploytest', 'PORT_RANGE_START=18980', 'PORT_RANGE_END=18989', 'FIREWALL=off'],
  });
  ({ state, env } = deployment);
  conf = path.join(state, 'supervisor', 'supervisord.conf');
}, 600_000);

afterAll(() => deployment?.stop(), 120_000);

describe('deploy/start.sh', () => {
  it('runs every service under supervisord and answers ready', async () => {
    expect(await ready()).toBe(true);
    const status = await supervisorctl('status');
    for (const p of ['auth', 'billing-chain', 'provisioner', 'keyvault', 'gateway', 'devchain', 'edge', 'caddy'])
      expect(status).toMatch(new RegExp(`^${p}\\s+RUNNING`, 'm'));
  });

  it('serves the API through the HTTPS edge, trusted with the local CA it made, and redirects HTTP to it', async () => {
    const ca = path.join(state, 'edge', 'data', 'pki', 'authorities', 'local', 'root.crt');
    const origin = `https://agenthost.localhost:${EDGE_HTTPS}`;
    const { stdout } = await run('curl', ['-s', '--cacert', ca, '-w', ' %{http_code}', `${origin}/api/health/ready`]);
    expect(stdout).toMatch(/ 200$/);
    const redirect = await run('curl', [
      '-s',
      '-o',
      '/dev/null',
      '-w',
      '%{http_code} %{redirect_url}',
      `http://agenthost.localhost:${EDGE_HTTPS + 1}/api/health/ready`,
    ]);
    expect(redirect.stdout).toBe(`308 ${origin}/api/health/ready`);
    // Caddy runs as the edge's user, not root.
    const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${await pidOf('caddy')}/status`, 'utf8'))![1]);
    expect((await run('id', ['-un', String(uid)])).stdout.trim()).toBe('agenthost-edge');
  });

  it('caps the connections one client address holds open to the edge, and lets it connect again once it closes some', async () => {
    const open = (port: number) =>
      new Promise<net.Socket>((resolve, reject) => {
        const sock = net.connect({ host: '127.0.0.1', port }, () => resolve(sock));
        sock.once('error', reject);
      });
    const held: net.Socket[] = [];
    try {
      // Both ports count: most on HTTPS, a few on the HTTP redirect port.
      for (let i = 0; i < EDGE_MAX_CONNS; i++) held.push(await open(i % 6 === 0 ? EDGE_HTTPS + 1 : EDGE_HTTPS));
      await expect(open(EDGE_HTTPS)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      await expect(open(EDGE_HTTPS + 1)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      held.pop()!.destroy();
      await waitFor(
        'a connection slot again',
        async () => {
          held.push(await open(EDGE_HTTPS));
          return true;
        },
        10_000,
        100,
      );
    } finally {
      for (const s of held) s.destroy();
    }
  });

  it('runs Prometheus, which scrapes the operator port of every service', async () => {
    expect(await supervisorctl('status')).toMatch(/^prometheus\s+RUNNING/m);
    await waitFor(
      'every service up in Prometheus',
      async () => {
        const r = (await (await fetch(`http://127.0.0.1:${prometheusPort}/api/v1/query?query=up`)).json()) as {
          data: { result: { metric: { job: string }; value: [number, string] }[] };
        };
        const up = r.data.result.filter((s) => s.value[1] === '1').map((s) => s.metric.job);
        return up.length === 5 ? up : undefined;
      },
      90_000,
      1000,
    );
  }, 120_000);

  it('audits the started system with `agenthost doctor`, as the provisioner sees it: no drift', async () => {
    const { stdout } = await run('bash', [path.join(repoRoot, 'bin/agenthost'), 'doctor', '--json'], { env });
    expect(JSON.parse(stdout)).toEqual({ scope: 'deploytest', ok: true, instances: 0, drift: [], notes: [] });
  });

  it('starts a service killed with SIGKILL again by itself, and the API recovers', async () => {
    const before = { gateway: await pidOf('gateway'), keyvault: await pidOf('keyvault'), auth: await pidOf('auth') };
    for (const pid of Object.values(before)) process.kill(pid, 'SIGKILL');
    await waitFor('every service back and ready', async () => (await ready()) && (await pidOf('gateway')) > 0, 60_000, 200);
    for (const [name, pid] of Object.entries(before)) {
      const now = await pidOf(name);
      expect(now, name).toBeGreaterThan(0);
      expect(now, name).not.toBe(pid);
      // Started again in /, not in the checkout start.sh ran from: one deleted since (a CI clone, an old release)
      // left the programs unable to start again (Postgres: "could not locate my own executable path").
      expect(readlinkSync(`/proc/${now}/cwd`), name).toBe('/');
    }
  });

  it('gives the master key to keyvault only, and the signing key to auth only', async () => {
    const key = readFileSync(path.join(state, 'secrets', 'master-key'), 'utf8').trim();
    expect(environ(await pidOf('keyvault'))).toContain(`MASTER_KEY_ENCRYPTION=${key}`);
    for (const p of ['gateway', 'auth', 'billing-chain', 'provisioner', 'devchain']) {
      expect(environ(await pidOf(p)).join('\n'), p).not.toContain(key);
    }
    // auth's signing key stays in its file, which only auth is pointed at.
    expect(environ(await pidOf('auth'))).toContain(`AUTH_JWT_PRIVATE_KEY_FILE=${path.join(state, 'secrets', 'auth-jwt.pem')}`);
    for (const p of ['gateway', 'keyvault', 'billing-chain', 'provisioner'])
      expect(environ(await pidOf(p)).join('\n'), p).not.toContain('AUTH_JWT_PRIVATE_KEY');
  });

  it('gives the backup key to the provisioner alone, as the path of a file only root reads', async () => {
    const file = path.join(state, 'secrets', 'backup-key');
    const key = readFileSync(file, 'utf8').trim();
    expect(Buffer.from(key, 'base64')).toHaveLength(32);
    expect(statSync(file).mode & 0o077).toBe(0);
    expect(environ(await pidOf('provisioner'))).toContain(`BACKUP_KEY_FILE=${file}`);
    for (const p of ['gateway', 'auth', 'billing-chain', 'keyvault', 'provisioner', 'devchain'])
      expect(environ(await pidOf(p)).join('\n'), p).not.toContain(key);
    for (const p of ['gateway', 'auth', 'billing-chain', 'keyvault', 'devchain']) expect(environ(await pidOf(p)).join('\n'), p).not.toContain('BACKUP_KEY');
  });

  it('gives each service only its own NATS identity and its own database role, never the admin', async () => {
    const schema: Record<string, string> = { gateway: 'gateway', auth: 'auth', 'billing-chain': 'billing', provisioner: 'provisioner', keyvault: 'keyvault' };
    for (const p of Object.keys(schema)) {
      const vars = environ(await pidOf(p));
      expect(vars, p).toContain(`NATS_NKEY_SEED_FILE=${path.join(state, 'nats-auth', `${p}.nk`)}`);
      const url = new URL(vars.find((v) => v.startsWith('DATABASE_URL='))!.slice('DATABASE_URL='.length));
      expect(url.username, p).toBe(`agenthost_${schema[p]}`);
      expect(
        vars.some((v) => v.startsWith('TEST_DATABASE_URL=')),
        p,
      ).toBe(false);
    }
  });

  it("runs each service but the provisioner as its own unprivileged user, who cannot read the others' secrets", async () => {
    const uidOf = (pid: number) => Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
    const uids = new Map<string, number>();
    for (const p of ['gateway', 'auth', 'billing-chain', 'keyvault', 'devchain']) {
      const uid = uidOf(await pidOf(p));
      expect(uid, p).toBeGreaterThan(0);
      expect((await run('id', ['-un', String(uid)])).stdout.trim(), p).toBe(`agenthost-${p}`);
      uids.set(p, uid);
    }
    expect(new Set(uids.values()).size).toBe(5);
    expect(uidOf(await pidOf('provisioner'))).toBe(0); // Docker, the firewall and loop mounts
    const as = (user: string, file: string) =>
      run('runuser', ['-u', user, '--', 'cat', file]).then(
        () => 'read',
        () => 'refused',
      );
    const secrets = path.join(state, 'secrets');
    expect(await as('agenthost-gateway', path.join(secrets, 'master-key'))).toBe('refused');
    expect(await as('agenthost-gateway', path.join(secrets, 'auth-jwt.pem'))).toBe('refused');
    expect(await as('agenthost-gateway', path.join(state, 'nats-auth', 'keyvault.nk'))).toBe('refused');
    expect(await as('agenthost-gateway', `/proc/${await pidOf('keyvault')}/environ`)).toBe('refused');
    // Each reads its own.
    expect(await as('agenthost-auth', path.join(secrets, 'auth-jwt.pem'))).toBe('read');
    expect(await as('agenthost-gateway', path.join(state, 'nats-auth', 'gateway.nk'))).toBe('read');
  });

  it('keeps the logs from other users and the supervisor configuration free of secrets', async () => {
    for (const p of ['gateway', 'keyvault']) expect(statSync(path.join(state, 'log', `${p}.log`)).mode & 0o007, p).toBe(0);
    const key = readFileSync(path.join(state, 'secrets', 'master-key'), 'utf8').trim();
    expect(readFileSync(conf, 'utf8')).not.toContain(key);
  });
});
