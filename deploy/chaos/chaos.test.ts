import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readlinkSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deploymentWithInstance, testLogDir, type UserDeployment, waitFor } from '../../packages/testkit/src/index.ts';

// Chaos on one host, as deploy/start.sh runs it: every part is killed with SIGKILL in turn (the five services, the
// edge's route keeper, Caddy, NATS, Postgres and the Docker engine), and nothing is run to bring it back. Each must
// be healthy again by itself within BACK_WITHIN_MS: its process running again under supervisord, the API ready
// through the HTTPS edge, the instance made before answering through the edge, and its owner's list served.
// An engine with live-restore keeps the agent running through its restart; one without it (Debian's 20.10:
// deploy/infra.sh) stops it, and the provisioner starts it again. Afterwards a delete leaves nothing behind. The
// times go to .test-logs/chaos.json. Run alone (deploy/test.sh's last phase): killing the engine breaks other suites.

const run = promisify(execFile);
const BACK_WITHIN_MS = 30_000;
// The edge's ports in this suite and its instance ports (18790-18799: no other suite uses them).
const EDGE_HTTPS = 18790;
let host: UserDeployment;
let cli: UserDeployment['cli'];
let ca: string;
let instanceId = '';
let startedAt = '';
const times: Record<string, number> = {};

/** The status code of an HTTPS GET through the edge to host (the API's or an instance's). */
const viaEdge = async (host: string, urlPath: string) =>
  (
    await run('curl', [
      '-s',
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      '--max-time',
      '5',
      '--cacert',
      ca,
      '--resolve',
      `${host}:${EDGE_HTTPS}:127.0.0.1`,
      `https://${host}:${EDGE_HTTPS}${urlPath}`,
    ]).catch(() => ({ stdout: '000' }))
  ).stdout;
/** When the instance's container last started (a live-restored container keeps it). */
const startedAtOf = async (id: string) => {
  const ids = (await run('docker', ['ps', '-q', '--filter', `label=agenthost.instance=${id}`])).stdout.trim().split('\n').filter(Boolean);
  expect(ids, `one running container for ${id}`).toHaveLength(1);
  return (await run('docker', ['inspect', '-f', '{{.State.StartedAt}}', ids[0]!])).stdout.trim();
};

/** The whole platform answers: the API ready through the edge, the instance through the edge, the owner's list. */
async function healthy(): Promise<boolean> {
  if ((await viaEdge('agenthost.localhost', '/api/health/ready')) !== '200') return false;
  if ((await viaEdge(`${instanceId}.agenthost.localhost`, '/')) !== '200') return false;
  return new RegExp(`^${instanceId}\\s+running`, 'm').test(await cli('list').catch(() => ''));
}

/** The pid of this network namespace's Docker engine (a Swarm suite's second engine lives in its own). */
function enginePid(): number {
  const mine = readlinkSync('/proc/self/ns/net');
  for (const p of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'dockerd' && readlinkSync(`/proc/${p}/ns/net`) === mine) return Number(p);
    } catch {
      /* gone meanwhile */
    }
  }
  return 0;
}

/** SIGKILL the part, then wait (running nothing) until its process is a new one and the platform answers. */
async function killAndWait(part: string, pidOf: () => Promise<number>) {
  const before = await pidOf();
  expect(before, `${part} runs before the kill`).toBeGreaterThan(0);
  const t0 = performance.now();
  process.kill(before, 'SIGKILL');
  await waitFor(
    `${part} back and the platform answering`,
    async () => {
      const now = await pidOf().catch(() => 0);
      return now > 0 && now !== before && (await healthy());
    },
    60_000,
    200,
  );
  times[part] = Math.round(performance.now() - t0);
  expect(times[part], `${part} took ${times[part]} ms to come back`).toBeLessThanOrEqual(BACK_WITHIN_MS);
}

beforeAll(async () => {
  host = await deploymentWithInstance('chaos', { edgeHttps: EDGE_HTTPS, instancePorts: [EDGE_HTTPS + 2, EDGE_HTTPS + 9] });
  ({ cli, instanceId } = host);
  ca = path.join(host.deployment.state, 'edge', 'data', 'pki', 'authorities', 'local', 'root.crt');
  await waitFor('the new instance answering through the edge', healthy, 60_000, 250);
  startedAt = await startedAtOf(instanceId);
}, 600_000);

afterAll(async () => {
  mkdirSync(testLogDir, { recursive: true });
  writeFileSync(path.join(testLogDir, 'chaos.json'), `${JSON.stringify({ back_within_ms: BACK_WITHIN_MS, times }, null, 2)}\n`);
  console.log(`chaos: back after SIGKILL (ms): ${JSON.stringify(times)}`);
  // Its logs join the run's, for the log scan (stop() removes the state directory).
  const logs = host && path.join(host.deployment.state, 'log');
  if (logs && existsSync(logs)) cpSync(logs, path.join(testLogDir, 'chaos'), { recursive: true });
  await host?.stop();
}, 180_000);

describe('a single host, every part SIGKILLed in turn with nothing run to recover', () => {
  for (const part of ['gateway', 'auth', 'billing-chain', 'keyvault', 'provisioner', 'edge', 'caddy', 'nats', 'postgres']) {
    it(`${part} is back by itself and the platform answers`, async () => {
      await killAndWait(part, async () => Number(await host.supervisorctl('pid', part)));
    }, 90_000);
  }

  it('the Docker engine is back by itself, and with it the agent (not restarted at all with live-restore)', async () => {
    const live = (await run('docker', ['info', '-f', '{{.LiveRestoreEnabled}}'])).stdout.trim() === 'true';
    await killAndWait('dockerd', async () => enginePid());
    if (live) expect(await startedAtOf(instanceId)).toBe(startedAt);
    // The provisioner drives the new engine: a lifecycle call goes through.
    await cli('restart', instanceId, '--wait');
    await waitFor('the restarted instance answering', healthy, 60_000, 250);
  }, 180_000);

  it('leaves nothing of the instance behind once it is deleted: no container, volume or mount', async () => {
    await cli('delete', instanceId, '--wait');
    const scope = ['--filter', 'label=agenthost.scope=chaos'];
    expect((await run('docker', ['ps', '-aq', ...scope])).stdout.trim()).toBe('');
    expect((await run('docker', ['volume', 'ls', '-q', ...scope])).stdout.trim()).toBe('');
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(instanceId);
    host.instanceId = '';
  }, 120_000);
});
