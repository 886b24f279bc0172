#!/usr/bin/env node
// agenthost instance bootstrap: the entrypoint of every agent image.
//
//   node bootstrap.mjs <agent command...>
//
// 1. fetches this instance's keys from the gateway (GET $AGENTHOST_KEYS_URL with
//    X-Instance-ID / X-Instance-Secret), retrying transient failures;
// 2. decrypts them in memory (see crypto.mjs for the format and AAD);
// 3. starts the agent with env = own env - {AGENTHOST_INSTANCE_SECRET, AGENTHOST_INSTANCE_KEY}
//    + decrypted keys.
// The instance credentials come on stdin (AGENTHOST_CREDENTIALS=stdin, one JSON line the provisioner
// writes at every container start) or, for an image run by hand, from those two variables.
//
// Zero dependencies (node: built-ins only): it is copied alone into images.
// Plaintext never touches disk; log lines (JSON on stderr) never carry secrets or values.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { decodeInstanceKey, KEY_NAME_RE, openKey } from "./crypto.mjs";
import { startKeyServer } from "./key-server.mjs";
import { siblingUrl, watchKeys } from "./hot-reload.mjs";

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
} from "./crypto.mjs";

/** Variables the agent must never see. */
export const STRIPPED_ENV = Object.freeze(["AGENTHOST_INSTANCE_SECRET", "AGENTHOST_INSTANCE_KEY"]);
/** Key names with this prefix are reserved for the platform and never injected. */
export const RESERVED_PREFIX = "AGENTHOST_";
export const DEFAULT_TIMEOUT_MS = 60_000;
const FORWARDED_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"];
const MAX_ATTEMPT_MS = 15_000;
const MAX_BACKOFF_MS = 5_000;
const MAX_BODY_BYTES = 8 * 1024 * 1024;

export class FatalError extends Error {
  constructor(message, fields = {}) {
    super(message);
    this.name = "FatalError";
    this.fields = fields;
  }
}

/** Makes a logger writing one JSON object per line to fd 2 (synchronously, so nothing is
 *  lost on exit/exec, and without switching the inherited stderr to non-blocking mode). */
export function makeLogger(instanceId, write = (line) => fs.writeSync(2, line)) {
  return (level, msg, fields = {}) => {
    const line = JSON.stringify({
      ts: new Date().toISOString(),
      level,
      msg,
      component: "agenthost-bootstrap",
      instance_id: instanceId ?? null,
      ...fields,
    });
    try {
      write(`${line}\n`);
    } catch {
      // stderr gone: nothing sensible to do
    }
  };
}

function safeUrlForLog(url) {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return "<invalid url>";
  }
}

function isRetryableStatus(status) {
  return status === 408 || status === 425 || status === 429 || status >= 500;
}

function parseRetryAfterMs(value) {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

const defaultSleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * GETs the keys map. Retries network errors, 408/425/429 and 5xx with capped exponential
 * backoff until timeoutMs has passed; 401/403/404 and other 4xx fail at once.
 * @returns {Promise<Record<string, unknown>>} key name -> sealed value
 */
export async function fetchKeys({
  url,
  instanceId,
  instanceSecret,
  timeoutMs = DEFAULT_TIMEOUT_MS,
  log = () => {},
  fetchImpl = globalThis.fetch,
  sleep = defaultSleep,
  now = Date.now,
}) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw new FatalError("AGENTHOST_KEYS_URL is not a valid URL");
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new FatalError("AGENTHOST_KEYS_URL must be http(s)");
  }
  const where = safeUrlForLog(url);
  const deadline = now() + timeoutMs;
  let backoff = 250;
  let lastError = "";
  for (let attempt = 1; ; attempt++) {
    const remaining = deadline - now();
    let res;
    try {
      res = await fetchImpl(url, {
        method: "GET",
        headers: {
          accept: "application/json",
          "user-agent": "agenthost-bootstrap/1",
          "x-instance-id": instanceId,
          "x-instance-secret": instanceSecret,
        },
        // Never follow a redirect: it would re-send the instance secret elsewhere.
        redirect: "manual",
        signal: AbortSignal.timeout(Math.max(1000, Math.min(MAX_ATTEMPT_MS, remaining))),
      });
    } catch (err) {
      lastError = `network error (${describeNetworkError(err)})`;
    }
    let retryAfterMs;
    if (res) {
      const status = res.status;
      if (status >= 200 && status < 300) {
        const body = await readBody(res);
        let json;
        try {
          json = JSON.parse(body);
        } catch {
          throw new FatalError("keys endpoint returned a body that is not JSON", { status });
        }
        const keys = json?.keys;
        if (keys === null || typeof keys !== "object" || Array.isArray(keys)) {
          throw new FatalError('keys endpoint response has no "keys" object', { status });
        }
        log("info", "keys fetched", { url: where, attempts: attempt, count: Object.keys(keys).length });
        return keys;
      }
      await res.arrayBuffer().catch(() => {});
      if (status === 401 || status === 403) {
        throw new FatalError(
          `keys endpoint rejected the instance credentials (HTTP ${status}); check AGENTHOST_INSTANCE_ID / AGENTHOST_INSTANCE_SECRET`,
          { status, url: where },
        );
      }
      if (status === 404) {
        throw new FatalError(
          "keys endpoint answered 404: the instance is unknown or AGENTHOST_KEYS_URL is wrong",
          { status, url: where },
        );
      }
      if (status >= 300 && status < 400) {
        throw new FatalError(`keys endpoint answered a redirect (HTTP ${status}); not followed`, {
          status,
          url: where,
        });
      }
      if (!isRetryableStatus(status)) {
        throw new FatalError(`keys endpoint answered HTTP ${status}`, { status, url: where });
      }
      lastError = `HTTP ${status}`;
      retryAfterMs = parseRetryAfterMs(res.headers.get("retry-after"));
    }
    const jitter = Math.floor(Math.random() * (backoff / 4));
    let wait = Math.min(MAX_BACKOFF_MS, backoff) + jitter;
    if (retryAfterMs !== undefined) wait = Math.max(wait, Math.min(retryAfterMs, 10_000));
    if (now() + wait >= deadline) {
      throw new FatalError(
        `could not fetch keys within ${timeoutMs} ms (${attempt} attempts, last: ${lastError})`,
        { url: where, attempts: attempt },
      );
    }
    log("warn", "keys fetch failed, retrying", { url: where, attempt, error: lastError, retry_in_ms: wait });
    await sleep(wait);
    backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
  }
}

function describeNetworkError(err) {
  if (err?.name === "TimeoutError" || err?.name === "AbortError") return "timeout";
  const cause = err?.cause;
  const text = cause?.code ?? err?.code ?? cause?.message ?? err?.message ?? err?.name ?? "error";
  return String(text).slice(0, 120);
}

async function readBody(res) {
  const buf = Buffer.from(await res.arrayBuffer());
  if (buf.length > MAX_BODY_BYTES) throw new FatalError("keys endpoint response too large");
  return buf.toString("utf8");
}

function describeName(name) {
  // Names are not secret, but an arbitrary string from the server is capped for the log.
  return name.length > 100 ? `${name.slice(0, 100)}…` : name;
}

/**
 * Decrypts every sealed key; bad ones are skipped (logged by name only).
 * @returns {{ env: Record<string,string>, loaded: string[], skipped: {name: string, reason: string}[] }}
 */
export function decryptKeys({ keys, instanceId, instanceKey, log = () => {} }) {
  const env = {};
  const loaded = [];
  const skipped = [];
  for (const [name, sealed] of Object.entries(keys)) {
    let reason;
    if (!KEY_NAME_RE.test(name)) {
      reason = "name is not a valid environment variable name";
    } else if (name.toUpperCase().startsWith(RESERVED_PREFIX)) {
      reason = `names starting with ${RESERVED_PREFIX} are reserved`;
    } else {
      try {
        env[name] = openKey({ instanceKey, instanceId, keyName: name, sealed });
        loaded.push(name);
        continue;
      } catch (err) {
        reason = err?.name === "KeyOpenError" ? err.message : "decryption failed";
      }
    }
    skipped.push({ name, reason });
    log("warn", "skipping key", { key_name: describeName(name), reason });
  }
  return { env, loaded, skipped };
}

/** The agent's environment: own env minus the instance credentials plus the decrypted keys. */
export function buildAgentEnv(baseEnv, decrypted) {
  const env = {};
  for (const [k, v] of Object.entries(baseEnv)) {
    if (v !== undefined && !STRIPPED_ENV.includes(k)) env[k] = v;
  }
  return Object.assign(env, decrypted);
}

/** execvp-style lookup of the command in PATH. */
export function resolveCommand(command, searchPath) {
  if (command.includes("/")) return path.resolve(command);
  const dirs = (searchPath || "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").split(":");
  for (const dir of dirs) {
    const candidate = path.join(dir || ".", command);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // keep looking
    }
  }
  return null;
}

function signalExitCode(signal) {
  return 128 + (os.constants.signals[signal] ?? 0);
}

function parseTimeout(value) {
  const n = Number(value);
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : DEFAULT_TIMEOUT_MS;
}

/**
 * Reads the one JSON line {"instance_secret","instance_key"} the provisioner writes on stdin. Reads go
 * through libuv's thread pool (fs.read), so fd 0 stays in blocking mode for the agent that inherits it.
 */
export async function readCredentials(fd, timeoutMs) {
  const chunks = [];
  let size = 0;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw new FatalError("no credentials arrived on stdin in time");
    const buf = Buffer.alloc(4096);
    let timer;
    const n = await Promise.race([
      new Promise((resolve, reject) => fs.read(fd, buf, 0, buf.length, null, (err, bytes) => (err ? reject(err) : resolve(bytes)))),
      new Promise((resolve) => {
        timer = setTimeout(() => resolve(-1), left);
      }),
    ]).finally(() => clearTimeout(timer));
    if (n === -1) throw new FatalError("no credentials arrived on stdin in time");
    if (n === 0) throw new FatalError("stdin closed before the credentials arrived");
    chunks.push(buf.subarray(0, n));
    size += n;
    const text = Buffer.concat(chunks).toString("utf8");
    const nl = text.indexOf("\n");
    if (nl >= 0 || size > 64 * 1024) {
      let parsed;
      try {
        parsed = JSON.parse(nl >= 0 ? text.slice(0, nl) : text);
      } catch {
        throw new FatalError("the credentials on stdin are not JSON");
      }
      for (const c of chunks) c.fill(0);
      return { secret: parsed?.instance_secret, key: parsed?.instance_key };
    }
  }
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
      log("warn", "signal received before the agent started; exiting", { signal: sig });
      process.exit(signalExitCode(sig));
    });
  }

  const fail = (msg, fields = {}, code = 1) => {
    log("error", msg, fields);
    process.exit(code);
  };

  if (argv.length === 0) fail("no agent command given (usage: bootstrap.mjs <command> [args...])", {}, 2);

  let decrypted = {};
  // Hot reload: the provisioner asks for it (AGENTHOST_KEYS_WATCH=1) and the image says how its agent reloads
  // (AGENTHOST_RELOAD_URL). The bootstrap then stays beside the agent, keeps the instance credentials in memory
  // and hands the keys out over a private socket, never in the agent's environment (see hot-reload.mjs).
  const hotReload = env.AGENTHOST_KEYS_WATCH === "1" && Boolean(env.AGENTHOST_RELOAD_URL) && env.AGENTHOST_BOOTSTRAP_SKIP_KEYS !== "1";
  let held;
  if (env.AGENTHOST_BOOTSTRAP_SKIP_KEYS === "1") {
    log("warn", "key retrieval skipped (AGENTHOST_BOOTSTRAP_SKIP_KEYS=1)");
  } else {
    // The provisioner hands the credentials over on stdin, so they are in no container configuration;
    // the environment variables remain for running an image by hand.
    let creds = { secret: env.AGENTHOST_INSTANCE_SECRET, key: env.AGENTHOST_INSTANCE_KEY };
    if (env.AGENTHOST_CREDENTIALS?.startsWith("file:")) {
      // The swarm driver: a swarm secret, in memory on the node, readable by the agent user only.
      try {
        const parsed = JSON.parse(fs.readFileSync(env.AGENTHOST_CREDENTIALS.slice(5), "utf8"));
        creds = { secret: parsed?.instance_secret, key: parsed?.instance_key };
      } catch (err) {
        fail("the credentials file cannot be read", { error: err.code ?? err.message });
      }
    } else if (env.AGENTHOST_CREDENTIALS === "stdin") {
      try {
        creds = await readCredentials(0, parseTimeout(env.AGENTHOST_BOOTSTRAP_TIMEOUT_MS));
      } catch (err) {
        fail(err.message);
      }
    }
    const missing = [
      ["AGENTHOST_INSTANCE_ID", instanceId],
      ["AGENTHOST_KEYS_URL", env.AGENTHOST_KEYS_URL],
      ["AGENTHOST_INSTANCE_SECRET", creds.secret],
      ["AGENTHOST_INSTANCE_KEY", creds.key],
    ]
      .filter(([, v]) => !v)
      .map(([k]) => k);
    if (missing.length > 0) fail("missing required environment variables", { missing });
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
      log("info", "keys loaded", { loaded: result.loaded, skipped: result.skipped.length });
    } catch (err) {
      if (err instanceof FatalError) fail(err.message, err.fields);
      fail("key retrieval failed unexpectedly", { error: err?.name ?? "Error" });
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
  if (!resolved) fail("agent command not found", { command }, 127);

  const requested = env.AGENTHOST_BOOTSTRAP_MODE;
  const mode = hotReload || requested === "spawn" || typeof process.execve !== "function" ? "spawn" : "exec";
  log("info", "starting agent", { command, mode, keys: hotReload ? Object.keys(watch.state.keys).length : Object.keys(decrypted).length, hot_reload: hotReload });

  if (mode === "exec") {
    // Replace this process: no process keeps the instance secret/key in its environment
    // (a same-uid agent could otherwise read them from /proc/<pid>/environ), signals
    // reach the agent directly and its exit status is the container's.
    try {
      process.execve(resolved, [command, ...args], agentEnv);
    } catch (err) {
      fail("could not exec the agent", { command, error: err?.code ?? String(err) }, 126);
    }
    return;
  }

  child = spawn(resolved, args, { argv0: command, env: agentEnv, stdio: "inherit" });
  child.on("error", (err) => fail("could not start the agent", { command, error: err?.code ?? String(err) }, 126));
  if (watch) {
    void watchKeys({
      watchUrl: siblingUrl(env.AGENTHOST_KEYS_URL, "watch"),
      appliedUrl: siblingUrl(env.AGENTHOST_KEYS_URL, "applied"),
      reloadUrl: env.AGENTHOST_RELOAD_URL,
      gatewayToken: env.OPENCLAW_GATEWAY_TOKEN,
      instanceId,
      instanceSecret: held.secret,
      state: watch.state,
      open: (sealed) => decryptKeys({ keys: sealed, instanceId, instanceKey: held.instanceKey, log }),
      log,
      signal: watch.abort.signal,
    });
  }
  child.on("exit", (code, signal) => {
    watch?.abort.abort();
    watch?.server.close();
    const exitCode = code ?? signalExitCode(signal);
    log(exitCode === 0 ? "info" : "warn", "agent exited", { code, signal, exit_code: exitCode });
    process.exit(exitCode);
  });
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
    makeLogger(process.env.AGENTHOST_INSTANCE_ID)("error", "bootstrap crashed", { error: err?.name ?? "Error" });
    process.exit(1);
  });
}
