import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { type Deployment, startDeployment } from './deployment.ts';
import { repoRoot } from './paths.ts';
import { freePort } from './ports.ts';
import { recordSecret } from './secrets.ts';

const run = promisify(execFile);

/** A start.sh host with one user on pro, signed in through the CLI, and one stand-in instance running. */
export interface UserDeployment {
  deployment: Deployment;
  /** Its supervisord configuration (supervisorctl -c). */
  conf: string;
  /** supervisorctl on its supervisord; resolves to the output (a nonzero exit too: `status` of a stopped program). */
  supervisorctl(...args: string[]): Promise<string>;
  /** The gateway's API base (http://127.0.0.1:<port>/api). */
  api: string;
  /** The user's access token (recorded for the log scan). */
  token: string;
  instanceId: string;
  /** bin/agenthost as that user; resolves to its standard output. */
  cli(...args: string[]): Promise<string>;
  /** Deletes the instance (if still there), stops the host, and removes the user's home and the instance network. */
  stop(): Promise<void>;
}

/**
 * deploy/start.sh on its own edge ports (`edgeHttps` and the next) and instance ports, running the stand-in agent
 * image, and a user's first steps through the CLI: a wallet, an airdrop, a sign-in, a pro subscription, an instance.
 */
export async function deploymentWithInstance(
  name: string,
  o: { edgeHttps: number; instancePorts: [number, number]; settings?: string[] },
): Promise<UserDeployment> {
  const gatewayPort = await freePort();
  const network = `agenthost-${name}`;
  const api = `http://127.0.0.1:${gatewayPort}/api`;
  const home = mkdtempSync(path.join(os.tmpdir(), `agenthost-${name}-home-`));
  const deployment = await startDeployment(name, {
    env: {
      GATEWAY_PORT: String(gatewayPort),
      EDGE_HTTPS_PORT: String(o.edgeHttps),
      EDGE_HTTP_PORT: String(o.edgeHttps + 1),
      METRICS_PORT_BASE: '0',
      PROMETHEUS_PORT: '0',
    },
    settings: [
      `INSTANCE_SCOPE=${name}`,
      `INSTANCE_NETWORK=${network}`,
      `PORT_RANGE_START=${o.instancePorts[0]}`,
      `PORT_RANGE_END=${o.instancePorts[1]}`,
      'FIREWALL=off',
      `FRAMEWORK_IMAGES='${JSON.stringify({ openclaw: 'agenthost/standin' })}'`, // agenthost.env is read by bash
      ...(o.settings ?? []),
    ],
  });
  const cli = async (...args: string[]) =>
    (
      await run('bash', [path.join(repoRoot, 'bin/agenthost'), ...args], {
        env: { ...process.env, AGENTHOST_HOME: home, AGENTHOST_API_URL: api, SOLANA_RPC_URL: `http://127.0.0.1:${deployment.env.DEVCHAIN_PORT}` },
      })
    ).stdout.trim();
  const conf = path.join(deployment.state, 'supervisor', 'supervisord.conf');
  const u: UserDeployment = {
    deployment,
    conf,
    supervisorctl: async (...args) => (await run('supervisorctl', ['-c', conf, ...args]).catch((e: { stdout: string }) => e)).stdout.trim(),
    api,
    token: '',
    instanceId: '',
    cli,
    stop: async () => {
      if (u.instanceId) await cli('delete', u.instanceId, '--wait').catch(() => {});
      await deployment.stop();
      await run('docker', ['network', 'rm', network]).catch(() => {});
      rmSync(home, { recursive: true, force: true });
    },
  };
  try {
    await cli('wallet', 'create');
    await cli('airdrop', '2');
    await cli('login');
    u.token = (JSON.parse(readFileSync(path.join(home, 'session.json'), 'utf8')) as { token: string }).token;
    recordSecret(u.token);
    await cli('subscribe', 'pro');
    u.instanceId = /"instance_id": "([^"]+)"/.exec(await cli('create', '--wait'))?.[1] ?? '';
    if (!u.instanceId) throw new Error(`${name}: the CLI's create printed no instance id`);
  } catch (err) {
    await u.stop();
    throw err;
  }
  return u;
}
