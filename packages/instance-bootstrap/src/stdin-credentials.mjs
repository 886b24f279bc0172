// The instance credentials on stdin: one JSON line {"instance_secret","instance_key"} the provisioner writes
// (AGENTHOST_CREDENTIALS=stdin before the agent starts, stdin-late when a warm pool agent is claimed).
// Node built-ins only, like every file of the bootstrap (it runs in the agent's image).
import fs from 'node:fs';
import { decodeInstanceKey } from './crypto.mjs';
import { FatalError } from './keys-fetch.mjs';

const MAX_LINE_BYTES = 64 * 1024;

/** The credentials of the first line of `chunks` (zeroed once parsed); undefined while there is neither a line nor 64 KiB. */
function parseLine(chunks) {
  const all = Buffer.concat(chunks);
  const text = all.toString('utf8');
  const nl = text.indexOf('\n');
  if (nl < 0 && all.length <= MAX_LINE_BYTES) return undefined;
  let parsed;
  try {
    parsed = JSON.parse(nl >= 0 ? text.slice(0, nl) : text);
  } catch {
    throw new FatalError('the credentials on stdin are not JSON');
  }
  for (const c of chunks) c.fill(0);
  return { secret: parsed?.instance_secret, key: parsed?.instance_key };
}

/**
 * Reads the credentials line before the agent starts. Reads go through libuv's thread pool (fs.read), so fd 0 stays
 * in blocking mode for the agent that inherits it.
 */
export async function readCredentials(fd, timeoutMs) {
  const chunks = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw new FatalError('no credentials arrived on stdin in time');
    const buf = Buffer.alloc(4096);
    let timer;
    const n = await Promise.race([
      new Promise((resolve, reject) => fs.read(fd, buf, 0, buf.length, null, (err, bytes) => (err ? reject(err) : resolve(bytes)))),
      new Promise((resolve) => {
        timer = setTimeout(() => resolve(-1), left);
      }),
    ]).finally(() => clearTimeout(timer));
    if (n === -1) throw new FatalError('no credentials arrived on stdin in time');
    if (n === 0) throw new FatalError('stdin closed before the credentials arrived');
    chunks.push(buf.subarray(0, n));
    const creds = parseLine(chunks);
    if (creds) return creds;
  }
}

/**
 * A warm pool agent's credentials, read whenever its claim writes them (no deadline), while the agent runs. The agent
 * has a stdin of its own (bootstrap.mjs), so fd 0 is the bootstrap's alone and is read as a stream: a read pending in
 * the thread pool would hold up process.exit (which joins that thread) until data came, so a bootstrap whose agent
 * ended would not; and an agent sharing the pipe could read the line, or make it non-blocking under that read (EAGAIN).
 * Returns {secret, instanceKey}, or ends the bootstrap through `fail`.
 */
export async function lateCredentials(instanceId, env, fail, stdin = process.stdin) {
  let creds;
  try {
    creds = await new Promise((resolve, reject) => {
      const chunks = [];
      const done = (err, value) => {
        stdin.off('data', onData).off('end', onEnd).off('error', done).pause();
        if (err) reject(err);
        else resolve(value);
      };
      const onData = (chunk) => {
        chunks.push(chunk);
        try {
          const parsed = parseLine(chunks);
          if (parsed) done(null, parsed);
        } catch (err) {
          done(err);
        }
      };
      const onEnd = () => done(new FatalError('stdin closed before the credentials arrived'));
      stdin.on('data', onData).on('end', onEnd).on('error', done);
    });
  } catch (err) {
    fail(err.message);
  }
  if (!instanceId || !env.AGENTHOST_KEYS_URL || !creds.secret || !creds.key) fail('the credentials that arrived are incomplete');
  try {
    return { secret: creds.secret, instanceKey: decodeInstanceKey(creds.key) };
  } catch (err) {
    fail(`AGENTHOST_INSTANCE_KEY is unusable: ${err.message}`);
  }
}
