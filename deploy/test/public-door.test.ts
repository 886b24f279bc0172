import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Deployment, freePort, newWallet, requestFrom, startDeployment, waitFor } from '../../packages/testkit/src/index.ts';

// deploy/start.sh on one host: the HTTPS edge is the only public door. The gateway's port answers on loopback and
// on the instance bridge only, and behind the edge each client is counted under its own address, which it cannot
// choose with an X-Forwarded-For of its own.

const run = promisify(execFile);
const NETWORK = 'agenthost-publicdoor';
// The edge's ports in this suite (18610-18611; its instance ports 18600-18609: no other suite uses them).
const EDGE_HTTPS = 18610;
const NONCES_PER_ADDRESS = 3;
let deployment: Deployment | undefined;
let state: string;
let gatewayPort: number;
let ca: string;

beforeAll(async () => {
  gatewayPort = await freePort();
  deployment = await startDeployment('public-door', {
    env: {
      GATEWAY_PORT: String(gatewayPort),
      EDGE_HTTPS_PORT: String(EDGE_HTTPS),
      EDGE_HTTP_PORT: String(EDGE_HTTPS + 1),
      METRICS_PORT_BASE: '0',
      PROMETHEUS_PORT: '0',
    },
    settings: [
      'INSTANCE_SCOPE=publicdoor',
      `INSTANCE_NETWORK=${NETWORK}`,
      'PORT_RANGE_START=18600',
      'PORT_RANGE_END=18609',
      'FIREWALL=off',
      `NONCES_PER_ADDRESS=${NONCES_PER_ADDRESS}`,
      'SIGN_IN_WINDOW_SECONDS=600',
    ],
  });
  state = deployment.state;
  ca = readFileSync(path.join(state, 'edge', 'data', 'pki', 'authorities', 'local', 'root.crt'), 'utf8');
}, 600_000);

afterAll(async () => {
  await deployment?.stop();
  await run('docker', ['network', 'rm', NETWORK]).catch(() => {});
}, 120_000);

/** Whether a TCP connection to host:port is taken. */
const connects = (host: string, port: number) =>
  new Promise<string>((resolve) => {
    const sock = net.connect({ host, port }, () => {
      sock.destroy();
      resolve('connected');
    });
    sock.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
  });

/** A nonce asked for through the edge by a client at the address `from` (any 127.0.0.0/8 address reaches it). */
const nonceViaEdge = (from: string, headers: Record<string, string> = {}) =>
  new Promise<number>((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: EDGE_HTTPS,
        path: `/api/auth/nonce?wallet_address=${newWallet().address}`,
        servername: 'agenthost.localhost',
        ca,
        localAddress: from,
        agent: false,
        headers: { host: `agenthost.localhost:${EDGE_HTTPS}`, ...headers },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end();
  });

/** A nonce asked for from `from` at the gateway's own TCP port, as a local process would. */
const nonceDirect = async (from: string, headers: Record<string, string> = {}) =>
  (
    await requestFrom(`http://127.0.0.1:${gatewayPort}/api/auth/nonce?wallet_address=${newWallet().address}`, {
      from,
      method: 'GET',
      headers,
    })
  ).status;

const statuses = async (n: number, ask: () => Promise<number>) => {
  const got: number[] = [];
  for (let i = 0; i < n; i++) got.push(await ask());
  return got;
};

const allowed = Array<number>(NONCES_PER_ADDRESS).fill(200);

describe('the gateway port on a single host', () => {
  it('answers on loopback and refuses connections to every other address of this host', async () => {
    expect(await connects('127.0.0.1', gatewayPort)).toBe('connected');
    const others = Object.values(os.networkInterfaces())
      .flat()
      .filter((a) => a && a.family === 'IPv4' && !a.internal)
      .map((a) => a!.address);
    expect(others.length).toBeGreaterThan(0);
    for (const address of others) expect(await connects(address, gatewayPort), address).toBe('ECONNREFUSED');
    // Through the edge, the API and the dashboard's place answer over HTTPS as before.
    expect(await nonceViaEdge('127.0.0.20')).toBe(200);
  });

  it('answers an instance on the instance bridge at the address instances are given, and its key calls reach keyvault', async () => {
    const gatewayIp = await waitFor(
      'the instance network',
      async () => (await run('docker', ['network', 'inspect', '-f', '{{(index .IPAM.Config 0).Gateway}}', NETWORK]).catch(() => undefined))?.stdout.trim(),
      60_000,
      500,
    );
    const script = `fetch('http://${gatewayIp}:${gatewayPort}/api/keys/retrieve', { headers: { 'x-instance-id': 'inst-none', 'x-instance-secret': 'x' } })
      .then(async (r) => console.log(r.status, (await r.json()).code))`;
    const answer = await waitFor(
      'the gateway on the bridge',
      async () =>
        (
          await run('docker', ['run', '--rm', '--network', NETWORK, '--entrypoint', 'node', 'agenthost/node:24', '-e', script]).catch(() => undefined)
        )?.stdout.trim(),
      60_000,
      1000,
    );
    // keyvault's answer to credentials it does not know.
    expect(answer).toMatch(/^401 /);
  }, 120_000);
});

describe('client addresses behind the edge', () => {
  it("counts each client's sign-ins under its own address: one client out of nonces does not stop another", async () => {
    expect(await statuses(NONCES_PER_ADDRESS + 1, () => nonceViaEdge('127.0.0.2'))).toEqual([...allowed, 429]);
    expect(await nonceViaEdge('127.0.0.3')).toBe(200);
  });

  it('does not let a client choose its address with its own X-Forwarded-For', async () => {
    // The client out of nonces cannot claim another address ...
    expect(await nonceViaEdge('127.0.0.2', { 'X-Forwarded-For': '203.0.113.7' })).toBe(429);
    // ... nor charge its requests to another client's.
    expect(await statuses(NONCES_PER_ADDRESS + 1, () => nonceViaEdge('127.0.0.4', { 'X-Forwarded-For': '127.0.0.5' }))).toEqual([...allowed, 429]);
    expect(await nonceViaEdge('127.0.0.5')).toBe(200);
  });

  it("does not believe X-Forwarded-For from a local process at the gateway's TCP port", async () => {
    let n = 0;
    const got = await statuses(NONCES_PER_ADDRESS + 1, () => nonceDirect('127.0.0.6', { 'X-Forwarded-For': `198.51.100.${++n}` }));
    expect(got).toEqual([...allowed, 429]);
  });

  it("lets only the edge's user reach the gateway's socket for the edge", async () => {
    const socket = path.join(state, 'run', 'gateway', 'edge.sock');
    const as = (user: string) =>
      run('runuser', ['-u', user, '--', 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '--unix-socket', socket, 'http://gateway/api/health/live']).then(
        (r) => r.stdout,
        () => 'refused',
      );
    expect(await as('agenthost-edge')).toBe('200');
    for (const user of ['agenthost-auth', 'agenthost-keyvault', 'nobody']) expect(await as(user), user).toBe('refused');
  });
});
