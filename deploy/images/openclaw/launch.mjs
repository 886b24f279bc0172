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
import fs from "node:fs";
import path from "node:path";

const PACKAGE_DIR = "/opt/openclaw/node_modules/openclaw";
const ENTRY = path.join(PACKAGE_DIR, "openclaw.mjs");

function log(level, msg, fields = {}) {
  const line = JSON.stringify({ ts: new Date().toISOString(), level, msg, component: "openclaw-launch", ...fields });
  try {
    fs.writeSync(2, `${line}\n`);
  } catch {
    // ignore
  }
}

function seedConfig() {
  const home = process.env.OPENCLAW_HOME || process.env.HOME || "/data/home";
  const stateDir = process.env.OPENCLAW_STATE_DIR || path.join(home, ".openclaw");
  const configPath = process.env.OPENCLAW_CONFIG_PATH || path.join(stateDir, "openclaw.json");
  if (fs.existsSync(configPath)) return;
  const config = {
    gateway: {
      mode: "local",
      controlUi: { root: path.join(PACKAGE_DIR, "dist", "control-ui") },
    },
    logging: { maxFileBytes: 16 * 1024 * 1024 },
  };
  try {
    fs.mkdirSync(path.dirname(configPath), { recursive: true, mode: 0o700 });
    fs.writeFileSync(configPath, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600, flag: "wx" });
    log("info", "seeded OpenClaw config", { path: configPath });
  } catch (err) {
    if (err?.code !== "EEXIST") log("warn", "could not seed OpenClaw config", { path: configPath, error: err?.code ?? String(err) });
  }
}

seedConfig();
const argv = [process.execPath, ENTRY, ...process.argv.slice(2)];
if (typeof process.execve === "function") {
  process.execve(process.execPath, argv, process.env);
} else {
  const { spawnSync } = await import("node:child_process");
  const r = spawnSync(process.execPath, argv.slice(1), { stdio: "inherit" });
  process.exit(r.status ?? 1);
}
