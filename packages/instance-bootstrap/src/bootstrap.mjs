#!/usr/bin/env node
// agenthost instance bootstrap: the entrypoint of every agent image.
//
//   node bootstrap.mjs <agent command...>
//
// 1. fetches this instance's keys from the gateway (GET $AGENTHOST_KEYS_URL with
//    X-Instance-ID / X-Instance-Secret), retrying transient failures (keys-fetch.mjs);
// 2. decrypts them in memory (agent-env.mjs; see crypto.mjs for the format and AAD);
// 3. starts the agent with env = own env - {AGENTHOST_INSTANCE_SECRET, AGENTHOST_INSTANCE_KEY}
//    + decrypted keys.
// The instance credentials come on stdin (AGENTHOST_CREDENTIALS=stdin, one JSON line the provisioner
// writes at every container start) or, for an image run by hand, from those two variables.
//
// Zero dependencies (node: built-ins only): the files of src/ are copied, alone, into images (deploy/images/build.sh).
// Plaintext never touches disk; log lines (JSON on stderr) never carry secrets or values.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { decodeInstanceKey } from './crypto.mjs';
import { buildAgentEnv, decryptKeys, STRIPPED_ENV } from './agent-env.mjs';
import { startKeyServer } from './key-server.mjs';
import { applyProviderKeys, openclawConfigPath } from './provider-keys.mjs';
import { siblingUrl, watchKeys } from './hot-reload.mjs';
import { DEFAULT_TIMEOUT_MS, FatalError, fetchKeys } from './keys-fetch.mjs';
import { makeLogger, resolveCommand } from './process-tools.mjs';
import { lateCredentials, readCredentials } from './stdin-credentials.mjs';

export { DEFAULT_TIMEOUT_MS, FatalError, fetchKeys } from './keys-fetch.mjs';
export { buildAgentEnv, decryptKeys, RESERVED_PREFIX, STRIPPED_ENV } from './agent-env.mjs';
export { readCredentials } from './stdin-credentials.mjs';

export {
  AAD_VERSION,
  aadFor,
  decodeInstanceKey,
  IV_BYTES,
  KEY_BYTES,
  KEY_NAME_RE,
  KeyOpenError,
  openKey,
  parseSealed,
  TAG_BYTES,
} from './crypto.mjs';

const FORWARDED_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'];

function signalExitCode(signal) {
  return 128 + (os.constants.signals[signal] ?? 0);
}

function parseTimeout(value) {
  const n = Number(value);
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : DEFAULT_TIMEOUT_MS;
}

/** Runs the bootstrap; resolves only when the process is about to be replaced or exit. */
export async function main(argv = process.argv.slice(2), env = process.env) {
  const instanceId = env.AGENTHOST_INSTANCE_ID || undefined;
  const log = makeLogger(instanceId);
  let child = null;

  // Until the agent runs, a stop request ends the bootstrap (as PID 1 nothing else would).
  for (const sig of FORWARDED_SIGNALS) {
    process.on(sig, () => {
      if (child) {
        try {
          child.kill(sig);
        } catch {
          // child already gone
        }
        return;
      }
      log('warn', 'signal received before the agent started; exiting', { signal: sig });
      process.exit(signalExitCode(sig));
    });
  }

  const fail = (msg, fields = {}, code = 1) => {
    log('error', msg, fields);
    process.exit(code);
  };

  if (argv.length === 0) fail('no agent command given (usage: bootstrap.mjs <command> [args...])', {}, 2);

  let decrypted = {};
  // Hot reload: the provisioner asks for it (AGENTHOST_KEYS_WATCH=1) and the image says how its agent reloads
  // (AGENTHOST_RELOAD_URL). The bootstrap then stays beside the agent, keeps the instance credentials in memory
  // and hands the keys out over a private socket, never in the agent's environment (see hot-reload.mjs).
  const hotReload = env.AGENTHOST_KEYS_WATCH === '1' && Boolean(env.AGENTHOST_RELOAD_URL) && env.AGENTHOST_BOOTSTRAP_SKIP_KEYS !== '1';
  // A warm pool agent (AGENTHOST_CREDENTIALS=stdin-late) boots before it has an owner: the agent starts without keys,
  // and the credentials come on stdin when a create claims it; the key watch then brings its owner's keys.
  const late = hotReload && env.AGENTHOST_CREDENTIALS === 'stdin-late';
  let held;
  if (late) {
    log('info', 'the agent starts before its credentials arrive (a warm pool agent)');
  } else if (env.AGENTHOST_BOOTSTRAP_SKIP_KEYS === '1') {
    log('warn', 'key retrieval skipped (AGENTHOST_BOOTSTRAP_SKIP_KEYS=1)');
  } else {
    // The provisioner hands the credentials over on stdin, so they are in no container configuration;
    // the environment variables remain for running an image by hand.
    let creds = { secret: env.AGENTHOST_INSTANCE_SECRET, key: env.AGENTHOST_INSTANCE_KEY };
    if (env.AGENTHOST_CREDENTIALS?.startsWith('file:')) {
      // The swarm driver: a swarm secret, in memory on the node, readable by the agent user only.
      try {
        const parsed = JSON.parse(fs.readFileSync(env.AGENTHOST_CREDENTIALS.slice(5), 'utf8'));
        creds = { secret: parsed?.instance_secret, key: parsed?.instance_key };
      } catch (err) {
        fail('the credentials file cannot be read', { error: err.code ?? err.message });
      }
    } else if (env.AGENTHOST_CREDENTIALS === 'stdin' || env.AGENTHOST_CREDENTIALS === 'stdin-late') {
      try {
        creds = await readCredentials(0, parseTimeout(env.AGENTHOST_BOOTSTRAP_TIMEOUT_MS));
      } catch (err) {
        fail(err.message);
      }
    }
    const missing = [
      ['AGENTHOST_INSTANCE_ID', instanceId],
      ['AGENTHOST_KEYS_URL', env.AGENTHOST_KEYS_URL],
      ['AGENTHOST_INSTANCE_SECRET', creds.secret],
      ['AGENTHOST_INSTANCE_KEY', creds.key],
    ]
      .filter(([, v]) => !v)
      .map(([k]) => k);
    if (missing.length > 0) fail('missing required environment variables', { missing });
    let instanceKey;
    try {
      instanceKey = decodeInstanceKey(creds.key);
    } catch (err) {
      fail(`AGENTHOST_INSTANCE_KEY is unusable: ${err.message}`);
    }
    try {
      const keys = await fetchKeys({
        url: env.AGENTHOST_KEYS_URL,
        instanceId,
        instanceSecret: creds.secret,
        timeoutMs: parseTimeout(env.AGENTHOST_BOOTSTRAP_TIMEOUT_MS),
        log,
      });
      const result = decryptKeys({ keys, instanceId, instanceKey, log });
      decrypted = result.env;
      log('info', 'keys loaded', { loaded: result.loaded, skipped: result.skipped.length });
    } catch (err) {
      if (err instanceof FatalError) fail(err.message, err.fields);
      fail('key retrieval failed unexpectedly', { error: err?.name ?? 'Error' });
    } finally {
      if (hotReload) held = { secret: creds.secret, instanceKey };
      else instanceKey.fill(0);
    }
  }
  for (const k of STRIPPED_ENV) delete process.env[k];

  let watch;
  if (hotReload) {
    const state = { keys: decrypted };
    const server = await startKeyServer({ getKeys: () => state.keys, log });
    watch = { state, server, abort: new AbortController() };
    decrypted = { AGENTHOST_KEYS_SOCKET: server.socketPath, AGENTHOST_KEYS_TOKEN: server.token };
  }
  const agentEnv = buildAgentEnv(env, decrypted);
  if (agentEnv.HOME) {
    // HOME usually lives on the state volume, which may start empty.
    try {
      fs.mkdirSync(agentEnv.HOME, { recursive: true, mode: 0o700 });
    } catch {
      // read-only or not ours: the agent will report what it needs
    }
  }

  const [command, ...args] = argv;
  const resolved = resolveCommand(command, agentEnv.PATH);
  if (!resolved) fail('agent command not found', { command }, 127);

  const requested = env.AGENTHOST_BOOTSTRAP_MODE;
  const mode = hotReload || requested === 'spawn' || typeof process.execve !== 'function' ? 'spawn' : 'exec';
  log('info', 'starting agent', {
    command,
    mode,
    keys: hotReload ? Object.keys(watch.state.keys).length : Object.keys(decrypted).length,
    hot_reload: hotReload,
  });

  if (mode === 'exec') {
    // Replace this process: no process keeps the instance secret/key in its environment
    // (a same-uid agent could otherwise read them from /proc/<pid>/environ), signals
    // reach the agent directly and its exit status is the container's.
    try {
      process.execve(resolved, [command, ...args], agentEnv);
    } catch (err) {
      fail('could not exec the agent', { command, error: err?.code ?? String(err) }, 126);
    }
    return;
  }

  // A late agent gets a stdin of its own (an empty pipe, as the container's is once read): the credentials still to
  // come on fd 0 are not for it (stdin-credentials.mjs).
  child = spawn(resolved, args, { argv0: command, env: agentEnv, stdio: [late ? 'pipe' : 'inherit', 'inherit', 'inherit'] });
  child.on('error', (err) => fail('could not start the agent', { command, error: err?.code ?? String(err) }, 126));
  child.on('exit', (code, signal) => {
    watch?.abort.abort();
    watch?.server.close();
    const exitCode = code ?? signalExitCode(signal);
    log(exitCode === 0 ? 'info' : 'warn', 'agent exited', { code, signal, exit_code: exitCode });
    process.exit(exitCode);
  });
  if (late) {
    held = await lateCredentials(instanceId, env, fail);
    log('info', 'credentials arrived: opening the key watch');
  }
  if (watch) {
    void watchKeys({
      watchUrl: siblingUrl(env.AGENTHOST_KEYS_URL, 'watch'),
      appliedUrl: siblingUrl(env.AGENTHOST_KEYS_URL, 'applied'),
      reloadUrl: env.AGENTHOST_RELOAD_URL,
      gatewayToken: env.OPENCLAW_GATEWAY_TOKEN,
      instanceId,
      instanceSecret: held.secret,
      state: watch.state,
      open: (sealed) => decryptKeys({ keys: sealed, instanceId, instanceKey: held.instanceKey, log }),
      // The OpenClaw image asks for standard provider keys to be wired into its config (its launcher does it at
      // every start; this keeps it right as keys change).
      ...(env.AGENTHOST_PROVIDER_KEYS === 'openclaw' ? { wire: (names) => applyProviderKeys({ configPath: openclawConfigPath(agentEnv), names, log }) } : {}),
      log,
      signal: watch.abort.signal,
    });
  }
}

function isEntrypoint() {
  if (!process.argv[1]) return false;
  try {
    return fs.realpathSync(process.argv[1]) === fs.realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntrypoint()) {
  main().catch((err) => {
    makeLogger(process.env.AGENTHOST_INSTANCE_ID)('error', 'bootstrap crashed', { error: err?.name ?? 'Error' });
    process.exit(1);
  });
}

export { makeLogger, resolveCommand };
