import { execFile } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './paths.ts';
import { freePort } from './ports.ts';

const run = promisify(execFile);

/** What a test's own deploy/start.sh must not inherit from the test run (it would use the run's servers instead). */
const INHERITED = ['DATABASE_URL', 'TEST_DATABASE_URL', 'NATS_URL', 'NATS_AUTH_DIR', 'SOLANA_RPC_URL', 'MASTER_KEY_ENCRYPTION'];

export interface Deployment {
  /** Its AGENTHOST_STATE. */
  state: string;
  /** The environment start.sh ran with (its ports), for stop.sh, bin/agenthost and the like. */
  env: NodeJS.ProcessEnv;
  stop(): Promise<void>;
}

/**
 * deploy/start.sh as a newcomer runs it, in a state directory of its own on free ports (Postgres, NATS, devchain, the
 * gateway; `env` names the edge's and any other), with `settings` as its agenthost.env: it shares only the Docker
 * engine, the image cache and Node 24 with the test run. A start that fails leaves its logs in .test-logs/<name>-start-failed
 * (the state directory goes with stop(), and the log scan reads them there).
 */
export async function startDeployment(name: string, o: { env: Record<string, string>; settings: string[] }): Promise<Deployment> {
  const state = mkdtempSync(path.join(os.tmpdir(), `agenthost-${name}-`));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    AGENTHOST_STATE: state,
    AGENTHOST_PG_PORT: String(await freePort()),
    AGENTHOST_NATS_PORT: String(await freePort()),
    DEVCHAIN_PORT: String(await freePort()),
    GATEWAY_PORT: String(await freePort()),
    ...o.env,
  };
  for (const k of INHERITED) delete env[k];
  chmodSync(state, 0o755); // as /var/lib/agenthost: Postgres's own user must reach its data directory
  // No warm pool unless the suite asks (deploy/start.sh keeps one by default): its boots would load every other suite.
  writeFileSync(path.join(state, 'agenthost.env'), [`WARM_POOL_JSON='{}'`, ...o.settings].join('\n'));
  let started = false;
  const stop = async () => {
    await run('bash', [path.join(repoRoot, 'deploy/stop.sh')], { env }).catch(() => {});
    if (!started && existsSync(path.join(state, 'log')))
      cpSync(path.join(state, 'log'), path.join(repoRoot, '.test-logs', `${name}-start-failed`), { recursive: true });
    rmSync(state, { recursive: true, force: true });
  };
  try {
    await run('bash', [path.join(repoRoot, 'deploy/start.sh')], { env, maxBuffer: 64 << 20 });
    started = true;
  } catch (err) {
    await stop();
    throw err;
  }
  return { state, env, stop };
}
