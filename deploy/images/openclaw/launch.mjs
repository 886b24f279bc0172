// Image-side launcher for OpenClaw (the CMD; the instance bootstrap runs it).
//
//   node /opt/agenthost/openclaw/launch.mjs <openclaw args...>
//
// On an instance's first start the state volume holds no OpenClaw config, so this seeds one
// with container defaults, then replaces itself with `openclaw <args...>`. An existing config
// (the user's) is never touched. Defaults:
//   gateway.mode = local                  the gateway may start without --allow-unconfigured
//   gateway.controlUi.root = package dir  serve the Control UI from the read-only image instead
//                                         of copying ~55 MB of "retained" assets into the volume
//   logging.maxFileBytes = 16 MiB         the file log lives on the /tmp tmpfs (64 MiB)
// With key hot reload (the bootstrap set AGENTHOST_KEYS_SOCKET), every start also makes sure the config defines
// the platform's secret provider `secrets.providers.agenthost`, the one key of a user's config we own: an exec
// provider that asks the bootstrap for the instance's keys. Users point any SecretRef at it, e.g.
//   models.providers.openai.apiKey = { source: "exec", provider: "agenthost", id: "OPENAI_API_KEY" }
// and every start wires a key stored under a provider's usual name (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) that
// way itself, unless the user's config sets that provider's key (/opt/agenthost/provider-keys.mjs; the bootstrap
// keeps it right as keys change).
import fs from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';

const PACKAGE_DIR = '/opt/openclaw/node_modules/openclaw';
const ENTRY = path.join(PACKAGE_DIR, 'openclaw.mjs');

function log(level, msg, fields = {}) {
  const line = JSON.stringify({ ts: new Date().toISOString(), level, msg, component: 'openclaw-launch', ...fields });
  try {
    fs.writeSync(2, `${line}\n`);
  } catch {
    // ignore
  }
}

const HOT_RELOAD = Boolean(process.env.AGENTHOST_KEYS_SOCKET);
/** OpenClaw passes the resolver only these variables (passEnv); the keys themselves never are. */
const KEYS_PROVIDER = Object.freeze({
  source: 'exec',
  command: '/opt/agenthost/keys-resolver.mjs',
  passEnv: ['AGENTHOST_KEYS_SOCKET', 'AGENTHOST_KEYS_TOKEN'],
  trustedDirs: ['/opt/agenthost'],
  timeoutMs: 5000,
});

/**
 * The instance's public address (the HTTPS edge, AGENTHOST_PUBLIC_URL from the provisioner): OpenClaw accepts its
 * Control UI's WebSocket only from allowed origins, so every start makes sure this one is among them (added, never
 * removing the user's own), with the loopback ones OpenClaw allows by default.
 */
const PUBLIC_ORIGINS = (() => {
  try {
    return [new URL(process.env.AGENTHOST_PUBLIC_URL ?? '').origin, 'http://localhost:18789', 'http://127.0.0.1:18789'];
  } catch {
    return [];
  }
})();

function configPathOf() {
  const home = process.env.OPENCLAW_HOME || process.env.HOME || '/data/home';
  const stateDir = process.env.OPENCLAW_STATE_DIR || path.join(home, '.openclaw');
  return process.env.OPENCLAW_CONFIG_PATH || path.join(stateDir, 'openclaw.json');
}

/** Adds or refreshes the platform's settings in an existing config (the key provider, the public origin); a config that is not plain JSON is left alone. */
function ensurePlatformSettings(configPath) {
  let config;
  try {
    config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  } catch (err) {
    log('warn', 'config is not plain JSON; secrets.providers.agenthost not checked', { path: configPath, error: err?.code ?? 'parse' });
    return;
  }
  const before = JSON.stringify(config);
  if (HOT_RELOAD) config.secrets = { ...config.secrets, providers: { ...config.secrets?.providers, agenthost: KEYS_PROVIDER } };
  if (PUBLIC_ORIGINS.length) {
    const origins = config.gateway?.controlUi?.allowedOrigins ?? [];
    const missing = PUBLIC_ORIGINS.filter((o) => !origins.includes(o));
    if (missing.length) config.gateway = { ...config.gateway, controlUi: { ...config.gateway?.controlUi, allowedOrigins: [...origins, ...missing] } };
  }
  if (JSON.stringify(config) === before) return;
  const tmp = `${configPath}.agenthost-${process.pid}`;
  try {
    fs.writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
    fs.renameSync(tmp, configPath);
    log('info', "set the platform's settings (secrets.providers.agenthost, gateway.controlUi.allowedOrigins)", { path: configPath });
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    log('warn', 'could not set secrets.providers.agenthost', { path: configPath, error: err?.code ?? String(err) });
  }
}

function seedConfig() {
  const configPath = configPathOf();
  if (fs.existsSync(configPath)) {
    if (HOT_RELOAD || PUBLIC_ORIGINS.length) ensurePlatformSettings(configPath);
    return;
  }
  const config = {
    gateway: {
      mode: 'local',
      controlUi: { root: path.join(PACKAGE_DIR, 'dist', 'control-ui'), ...(PUBLIC_ORIGINS.length ? { allowedOrigins: PUBLIC_ORIGINS } : {}) },
    },
    logging: { maxFileBytes: 16 * 1024 * 1024 },
    ...(HOT_RELOAD ? { secrets: { providers: { agenthost: KEYS_PROVIDER } } } : {}),
  };
  try {
    fs.mkdirSync(path.dirname(configPath), { recursive: true, mode: 0o700 });
    fs.writeFileSync(configPath, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
    log('info', 'seeded OpenClaw config', { path: configPath });
  } catch (err) {
    if (err?.code !== 'EEXIST') log('warn', 'could not seed OpenClaw config', { path: configPath, error: err?.code ?? String(err) });
  }
}

/**
 * A state volume is only ever mounted by its one instance container. A gateway-owner lease in OpenClaw's state
 * database held by another host is therefore stale: it came with a backup restored here (taken while the agent ran,
 * so its lease was held) or a volume moved from another node. OpenClaw reclaims a dead owner's lease only on the
 * same host and otherwise waits the lease out (5 minutes, failing each start meanwhile), so it is dropped here.
 */
function dropForeignGatewayLease() {
  const stateDir = process.env.OPENCLAW_STATE_DIR || path.join(process.env.OPENCLAW_HOME || process.env.HOME || '/data/home', '.openclaw');
  const file = path.join(stateDir, 'state', 'openclaw.sqlite');
  if (!fs.existsSync(file)) return;
  let db;
  try {
    const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
    db = new DatabaseSync(file);
    const dropped = db
      .prepare("DELETE FROM state_leases WHERE scope = 'gateway-owner' AND coalesce(json_extract(payload_json, '$.owner.host'), '') <> ?")
      .run(hostname()).changes;
    if (dropped) log('info', 'dropped the gateway lease of another host (restored or moved state)', { path: file });
  } catch (err) {
    log('warn', 'could not check the gateway lease', { path: file, error: err?.code ?? String(err?.message ?? err) });
  } finally {
    try {
      db?.close();
    } catch {
      // ignore
    }
  }
}

/** Wires the stored standard provider keys (by name; the key server hands out names without values). */
async function wireProviderKeys() {
  if (!HOT_RELOAD || process.env.AGENTHOST_PROVIDER_KEYS !== 'openclaw') return;
  try {
    const { askKeyServer } = await import('/opt/agenthost/key-server.mjs');
    const { applyProviderKeys } = await import('/opt/agenthost/provider-keys.mjs');
    const { names } = await askKeyServer({ socketPath: process.env.AGENTHOST_KEYS_SOCKET, token: process.env.AGENTHOST_KEYS_TOKEN, names: true });
    applyProviderKeys({ configPath: configPathOf(), names: names ?? [], log });
  } catch (err) {
    log('warn', 'could not wire provider keys', { error: String(err?.code ?? err?.message ?? err).slice(0, 120) });
  }
}

seedConfig();
await wireProviderKeys();
dropForeignGatewayLease();
const argv = [process.execPath, ENTRY, ...process.argv.slice(2)];
if (typeof process.execve === 'function') {
  process.execve(process.execPath, argv, process.env);
} else {
  const { spawnSync } = await import('node:child_process');
  const r = spawnSync(process.execPath, argv.slice(1), { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
