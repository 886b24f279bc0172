// Stand-in agent for tests: a zero-dependency HTTP server shaped like the OpenClaw gateway's
// probe surface. Started by the instance bootstrap (the image's ENTRYPOINT).
//
//   GET /healthz  200 {"ok":true}                           liveness, from the first moment
//   GET /readyz   200 {"ok":true,"ready":true} once ready,  503 {"ok":false,"ready":false} before
//   GET /env      200 {"names":[...],"sha256":{...}}        names of the environment variables the
//                 agent received and the SHA-256 of each value (never the values): lets tests
//                 check key injection end to end. Test-only image.
//   GET /keys     200 {"names":[...],"sha256":{...},"reloads":n} the keys it resolved through the bootstrap's
//                 key server (key hot reload, AGENTHOST_KEYS_SOCKET set): names and SHA-256 only
//   POST /reload  resolves its keys again (runs /opt/agenthost/keys-resolver.mjs --all, as OpenClaw runs its
//                 exec secret provider); 200 {"ok":true}, or 500 {"ok":false,"reason"} keeping the old keys
//   GET /ballast?mb=N  200 {"ok":true,"ballast_mb":total}  the agent holds N MB more, every page written
//   GET /         200 {"agent":"standin",...,"state":{"born":"<id>","boots":N}}: state kept in the
//                 instance volume (/data/standin-state.json), made at the first start and counted at each
//                 one, so tests see an agent's data survive a restart or a move to another node.
//                 The state file is watched (inotify), as OpenClaw watches its config file on the volume.
//   GET /ws       a WebSocket that echoes each text message back (tests of proxies in front of agents, which
//                 talk to their UIs over WebSockets as OpenClaw does); the first message is {"hello":"<instance id>"}
//
// Environment:
//   STANDIN_PORT             listen port (default 18789), on 0.0.0.0
//   STANDIN_READY_DELAY_MS   readiness delay after listening (default 0)
//   STANDIN_NEVER_READY=1    never become ready
//   STANDIN_EXIT_AFTER_MS    exit with STANDIN_EXIT_CODE (default 1) after this many ms (crash tests)
//   STANDIN_EXIT_BOOTS       only in the first this many boots of its volume (a boot that fails once)
import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync, renameSync, watch, writeFileSync } from 'node:fs';
import http from 'node:http';

const port = intEnv('STANDIN_PORT', 18789);
const readyDelayMs = intEnv('STANDIN_READY_DELAY_MS', 0);
const neverReady = process.env.STANDIN_NEVER_READY === '1';
const exitAfterMs = intEnv('STANDIN_EXIT_AFTER_MS', -1);
const exitCode = intEnv('STANDIN_EXIT_CODE', 1);
const startedAt = Date.now();
let ready = false;
const stateFile = process.env.STANDIN_STATE_FILE ?? '/data/standin-state.json';
const state = bootState(stateFile);
// Watched as OpenClaw watches its config on the volume (an inotify watch a checkpoint must carry over).
if (state) watch(stateFile, () => {}).on('error', () => {});

/** The state of earlier starts, one more boot counted; none (null) when the volume is not writable. */
function bootState(file) {
  let prev = { born: randomUUID(), boots: 0 };
  try {
    prev = JSON.parse(readFileSync(file, 'utf8'));
  } catch {}
  const next = { born: prev.born, boots: prev.boots + 1 };
  try {
    writeFileSync(`${file}.tmp`, JSON.stringify(next));
    renameSync(`${file}.tmp`, file);
    return next;
  } catch {
    return null;
  }
}
// What GET /ballast made the agent hold.
const ballast = [];
// The keys resolved through the bootstrap, swapped whole on a successful reload (as OpenClaw's snapshot).
let keys = {};
let reloads = 0;

function resolveKeys() {
  return new Promise((resolve, reject) => {
    execFile(
      '/opt/agenthost/keys-resolver.mjs',
      ['--all'],
      { timeout: 5000, env: { AGENTHOST_KEYS_SOCKET: process.env.AGENTHOST_KEYS_SOCKET ?? '', AGENTHOST_KEYS_TOKEN: process.env.AGENTHOST_KEYS_TOKEN ?? '' } },
      (err, stdout) => {
        if (err) return reject(new Error('the resolver failed'));
        try {
          resolve(JSON.parse(stdout).values ?? {});
        } catch {
          reject(new Error('the resolver answered no JSON'));
        }
      },
    );
  });
}

async function reload() {
  keys = await resolveKeys();
  reloads++;
}

const sha = (v) =>
  createHash('sha256')
    .update(v ?? '')
    .digest('hex');

function intEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  return Number.isInteger(n) ? n : fallback;
}

function log(msg, fields = {}) {
  process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), level: 'info', msg, component: 'standin', ...fields })}\n`);
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(text);
}

const server = http.createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'POST' && path === '/reload') {
    return void reload().then(
      () => send(res, 200, { ok: true }),
      (err) => send(res, 500, { ok: false, reason: err.message }),
    );
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, { ok: false, error: 'method not allowed' });
  switch (path) {
    case '/healthz':
    case '/health':
      return send(res, 200, { ok: true });
    case '/readyz':
    case '/ready':
      return ready ? send(res, 200, { ok: true, ready: true }) : send(res, 503, { ok: false, ready: false });
    case '/env': {
      const names = Object.keys(process.env).sort();
      const sha256 = {};
      for (const name of names)
        sha256[name] = createHash('sha256')
          .update(process.env[name] ?? '')
          .digest('hex');
      return send(res, 200, { names, sha256 });
    }
    case '/keys': {
      const names = Object.keys(keys).sort();
      return send(res, 200, { names, sha256: Object.fromEntries(names.map((n) => [n, sha(keys[n])])), reloads });
    }
    case '/ballast': {
      // Memory the agent holds from now on (?mb=, at most 1024), every page written: a larger checkpoint, for tests.
      const mb = Math.min(Number(new URL(req.url ?? '/', 'http://agent').searchParams.get('mb')) || 0, 1024);
      for (let i = 0; i < mb; i++) ballast.push(Buffer.alloc(2 ** 20, (i % 255) + 1));
      return send(res, 200, { ok: true, ballast_mb: ballast.length });
    }
    case '/slow': {
      // An answer that takes a while (?ms=, at most 10 s): a request in progress, for the sleep race tests.
      const ms = Math.min(Number(new URL(req.url ?? '/', 'http://agent').searchParams.get('ms')) || 1000, 10_000);
      log('slow request', { ms });
      return void setTimeout(() => send(res, 200, { ok: true, slow_ms: ms }), ms);
    }
    case '/':
      return send(res, 200, {
        agent: 'standin',
        instance_id: process.env.AGENTHOST_INSTANCE_ID ?? null,
        ready,
        uptime_ms: Date.now() - startedAt,
        pid: process.pid,
        uid: process.getuid?.(),
        state,
      });
    default:
      return send(res, 404, { ok: false, error: 'not found' });
  }
});
server.keepAliveTimeout = 5000;

// A minimal WebSocket endpoint (RFC 6455): text frames up to 64 KiB, echoed back unmasked; anything else closes.
server.on('upgrade', (req, socket) => {
  const key = req.headers['sec-websocket-key'];
  if ((req.url ?? '').split('?')[0] !== '/ws' || typeof key !== 'string') return socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n');
  const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  const frame = (text) => {
    const data = Buffer.from(text);
    const head = data.length < 126 ? Buffer.from([0x81, data.length]) : Buffer.from([0x81, 126, data.length >> 8, data.length & 255]);
    return Buffer.concat([head, data]);
  };
  socket.write(frame(JSON.stringify({ hello: process.env.AGENTHOST_INSTANCE_ID ?? null })));
  let buf = Buffer.alloc(0);
  socket.on('data', (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 2) {
      const opcode = buf[0] & 0x0f;
      let len = buf[1] & 0x7f;
      let off = 2;
      if (len === 126) {
        if (buf.length < 4) return;
        len = buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) return socket.destroy();
      const masked = (buf[1] & 0x80) !== 0;
      if (buf.length < off + (masked ? 4 : 0) + len) return;
      const mask = masked ? buf.subarray(off, off + 4) : null;
      off += masked ? 4 : 0;
      const payload = Buffer.from(buf.subarray(off, off + len));
      if (mask) for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4];
      buf = buf.subarray(off + len);
      if (opcode === 0x1) socket.write(frame(payload.toString()));
      else return socket.end(Buffer.from([0x88, 0]));
    }
  });
  socket.on('error', () => {});
});

if (process.env.AGENTHOST_KEYS_SOCKET) {
  reload().catch((err) => log('could not resolve keys at start', { error: err.message }));
}

server.listen(port, '0.0.0.0', () => {
  log('listening', { port, ready_delay_ms: readyDelayMs, never_ready: neverReady });
  if (neverReady) return;
  const markReady = () => {
    ready = true;
    log('ready');
  };
  if (readyDelayMs > 0) setTimeout(markReady, readyDelayMs);
  else markReady();
});

const exitBoots = intEnv('STANDIN_EXIT_BOOTS', -1);
if (exitAfterMs >= 0 && (exitBoots < 0 || (state?.boots ?? 0) <= exitBoots)) {
  setTimeout(() => {
    log('exiting on purpose', { exit_code: exitCode });
    process.exit(exitCode);
  }, exitAfterMs);
}

// As PID 1 (the bootstrap execs the agent) nothing handles signals unless we do.
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(sig, () => {
    log('stopping', { signal: sig });
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
  });
}
