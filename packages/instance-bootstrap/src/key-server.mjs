// The bootstrap's key server: the agent's secret resolver (keys-resolver.mjs, run by OpenClaw's `exec`
// SecretRef provider) asks it for the current keys over a unix socket in a private directory on /tmp (a tmpfs:
// nothing reaches a disk), quoting a random token the agent got at start. The keys live only in the bootstrap's
// memory, so a reload always sees the newest ones.
//
// Protocol: one JSON line {"token","ids"} ("ids": names, or "*" for every key) → one JSON line
// {"protocolVersion":1,"values":{name:value},"errors":{name:{"code":"NOT_FOUND"}}}, then the socket closes.
// {"token","names":true} → {"protocolVersion":1,"names":[...]}: the names alone, for the image's launcher to wire
// standard provider keys (provider-keys.mjs) without holding a value.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const MAX_REQUEST_BYTES = 64 * 1024;

/**
 * Starts the server. `getKeys()` returns the current name -> value map.
 * @returns {Promise<{ socketPath: string, token: string, close(): void }>}
 */
export async function startKeyServer({ getKeys, dir = os.tmpdir(), log = () => {} }) {
  // mkdtemp makes the directory 0700: only the agent's own user can reach the socket.
  const home = fs.mkdtempSync(path.join(dir, 'agenthost-keys-'));
  const socketPath = path.join(home, 'keys.sock');
  const token = randomBytes(32).toString('base64url');
  const expected = Buffer.from(token);
  const server = net.createServer((conn) => {
    let buf = '';
    conn.setTimeout(5000, () => conn.destroy());
    conn.on('error', () => {});
    conn.on('data', (chunk) => {
      buf += chunk.toString('utf8');
      if (buf.length > MAX_REQUEST_BYTES) return conn.destroy();
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      conn.end(`${JSON.stringify(answer(buf.slice(0, nl), expected, getKeys, log))}\n`);
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, resolve);
  });
  fs.chmodSync(socketPath, 0o600);
  return {
    socketPath,
    token,
    close() {
      server.close();
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}

function answer(line, expected, getKeys, log) {
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    return { protocolVersion: 1, values: {}, error: 'bad request' };
  }
  const given = Buffer.from(typeof req?.token === 'string' ? req.token : '');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    log('warn', 'key server refused a request with a wrong token');
    return { protocolVersion: 1, values: {}, error: 'unauthorized' };
  }
  const keys = getKeys();
  if (req.names === true) return { protocolVersion: 1, names: Object.keys(keys) };
  const ids = req.ids === '*' ? Object.keys(keys) : Array.isArray(req.ids) ? req.ids.filter((i) => typeof i === 'string') : [];
  const values = {};
  const errors = {};
  for (const id of ids) {
    if (Object.hasOwn(keys, id)) values[id] = keys[id];
    else errors[id] = { code: 'NOT_FOUND' };
  }
  return { protocolVersion: 1, values, errors };
}

/** The resolver's side: asks the key server for ids ("*" for all), or with `names` for the names only. Rejects on any failure. */
export function askKeyServer({ socketPath, token, ids, names = false, timeoutMs = 4000 }) {
  return new Promise((resolve, reject) => {
    const conn = net.createConnection(socketPath);
    let buf = '';
    const timer = setTimeout(() => conn.destroy(new Error('key server timed out')), timeoutMs);
    conn.on('connect', () => conn.write(`${JSON.stringify(names ? { token, names: true } : { token, ids })}\n`));
    conn.on('data', (chunk) => {
      buf += chunk.toString('utf8');
    });
    conn.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    conn.on('end', () => {
      clearTimeout(timer);
      try {
        const reply = JSON.parse(buf);
        if (reply.error) reject(new Error(`key server: ${reply.error}`));
        else resolve(reply);
      } catch {
        reject(new Error('key server answered no JSON'));
      }
    });
  });
}
