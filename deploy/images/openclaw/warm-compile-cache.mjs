// Build-time only (the Dockerfile's RUN, as root): boots the gateway once, as the agent's user and the way an
// instance starts (launch.mjs seeds its config, then `openclaw gateway`), with NODE_COMPILE_CACHE at the image's
// cache directory, waits for /readyz and GET /, then stops it with SIGTERM so Node writes V8's code cache of every
// module it loaded. The image ships that cache read-only; at run time Node reads it (a read-only directory is fine:
// writes of entries it lacks fail quietly) instead of compiling the same ~300 MB of JavaScript again.
//
//   node warm-compile-cache.mjs <cache dir>
//
// The cache's subdirectory is named after Node's version, the V8 flags that change generated code, and the uid:
// it is warmed as 10001 with no such flag, so an agent started with one (--optimize-for-size, --jitless) misses it
// and compiles as before. The heap flags (--max-old-space-size, --max-semi-space-size) do not change it. Nothing of the boot stays in the image: its state is in a scratch
// directory removed afterwards, never under /data (which Docker copies into each new volume).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const cacheDir = process.argv[2];
if (!cacheDir) throw new Error('usage: warm-compile-cache.mjs <cache dir>');
const UID = 10001;
const PORT = 18789;
const tmpBefore = new Set(fs.readdirSync('/tmp'));
const scratch = fs.mkdtempSync('/tmp/openclaw-warm-');
fs.chownSync(scratch, UID, UID);
fs.mkdirSync(cacheDir, { recursive: true });
fs.chownSync(cacheDir, UID, UID);

const log = (msg) => process.stderr.write(`[warm-compile-cache] ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = Date.now();
const child = spawn(
  process.execPath,
  ['/opt/agenthost/openclaw/launch.mjs', 'gateway', '--allow-unconfigured', '--bind', 'lan', '--port', String(PORT), '--auth', 'token'],
  {
    uid: UID,
    gid: UID,
    cwd: scratch,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      PATH: process.env.PATH,
      LANG: 'C.UTF-8',
      HOME: path.join(scratch, 'home'),
      TMPDIR: scratch,
      OPENCLAW_STATE_DIR: path.join(scratch, 'home', '.openclaw'),
      OPENCLAW_NO_AUTO_UPDATE: '1',
      OPENCLAW_GATEWAY_TOKEN: randomBytes(24).toString('hex'),
      NODE_OPTIONS: '--max-old-space-size=1536',
      NODE_COMPILE_CACHE: cacheDir,
      // As in the image's ENV: the launcher keeps NODE_COMPILE_CACHE instead of respawning itself with a cache
      // directory of its own below it.
      OPENCLAW_PACKAGED_COMPILE_CACHE_RESPAWNED: '1',
    },
  },
);
let exited = null;
child.on('exit', (code, signal) => {
  exited = { code, signal };
});

async function get(pathname) {
  try {
    const r = await fetch(`http://127.0.0.1:${PORT}${pathname}`, { signal: AbortSignal.timeout(5000) });
    await r.arrayBuffer();
    return r.status;
  } catch {
    return 0;
  }
}

let ok = false;
try {
  const deadline = Date.now() + 600_000;
  while (!exited && Date.now() < deadline) {
    if ((await get('/readyz')) === 200) {
      const root = await get('/');
      if (root !== 200) throw new Error(`the gateway is ready but GET / answered ${root}`);
      ok = true;
      break;
    }
    await sleep(200);
  }
  if (!ok) throw new Error(exited ? `the gateway exited (${JSON.stringify(exited)})` : 'the gateway was not ready in time');
  log(`ready in ${Date.now() - t0} ms; stopping it so Node writes the cache`);
  await sleep(5000); // what the gateway loads just after ready (heartbeat, sidecars)
  child.kill('SIGTERM');
  const stopBy = Date.now() + 120_000;
  while (!exited && Date.now() < stopBy) await sleep(100);
  if (!exited) throw new Error('the gateway did not stop on SIGTERM');
} finally {
  if (!exited) child.kill('SIGKILL');
  // The scratch directory, and what the gateway keeps in /tmp whatever TMPDIR says (its file log, state locks).
  for (const entry of fs.readdirSync('/tmp')) if (!tmpBefore.has(entry)) fs.rmSync(path.join('/tmp', entry), { recursive: true, force: true });
}

let files = 0;
let bytes = 0;
for (const sub of fs.readdirSync(cacheDir)) {
  for (const f of fs.readdirSync(path.join(cacheDir, sub))) {
    files++;
    bytes += fs.statSync(path.join(cacheDir, sub, f)).size;
  }
}
if (files < 100) throw new Error(`only ${files} cache entries were written`);
log(`${files} entries, ${Math.round(bytes / 2 ** 20)} MB in ${cacheDir} (${fs.readdirSync(cacheDir).join(', ')})`);
