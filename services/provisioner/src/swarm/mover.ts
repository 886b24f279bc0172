import { randomBytes } from 'node:crypto';
import type { DockerEngine } from '../docker/engine.ts';
import { dockerStatus, o } from '../docker/call.ts';
import { AGENT_USER, labels } from '../docker/spec.ts';
import { removeJob, runJob, startJob } from './janitor.ts';
import { networkName, volumeName } from './spec.ts';

/**
 * Copies an instance's volume from one node to another through two one-shot swarm jobs on an overlay network of
 * the instance's own, made for its moves (the instance itself runs on its node's bridge): a sender on the old node serves one tar of the volume (read-only), a receiver on the new
 * node fetches it into a volume of the same name there. Both run the instance's own image as the agent's user
 * with every capability dropped: the files are the agent's, and a first mount of the new volume takes the
 * image's /data ownership, as the instance's own mount would. A SHA-256 of the stream, sent as an HTTP
 * trailer, proves the copy whole; tar's own checks catch a cut stream too.
 */

const PORT = 7070;

const SEND = `
const http = require('node:http');
const { createHash } = require('node:crypto');
const { spawn } = require('node:child_process');
const server = http.createServer((req, res) => {
  if (req.url !== '/archive' || req.headers.authorization !== 'Bearer ' + process.env.MOVE_TOKEN) { res.writeHead(403); return res.end(); }
  const hash = createHash('sha256');
  const tar = spawn('tar', ['-C', '/data', '-cf', '-', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
  res.writeHead(200, { 'content-type': 'application/x-tar', trailer: 'x-sha256' });
  tar.stdout.on('data', (c) => { hash.update(c); res.write(c); });
  tar.on('close', (code) => {
    if (code !== 0) return res.destroy();
    res.addTrailers({ 'x-sha256': hash.digest('hex') });
    // One whole copy served: done (the job completes and lets the volume go).
    res.end(() => process.exit(0));
  });
});
server.listen(${PORT});
setTimeout(() => process.exit(1), Number(process.env.MOVE_TIMEOUT_MS));
process.on('SIGTERM', () => process.exit(143));
`;

const RECEIVE = `
const http = require('node:http');
const { createHash } = require('node:crypto');
const { spawn } = require('node:child_process');
// Reaching the sender is bounded apart from the copy: a sender that cannot be reached (its name not yet known on
// this node's overlay) fails the copy in two minutes, not the move's whole timeout, and the next pass tries again.
const end = Date.now() + Math.min(Number(process.env.MOVE_TIMEOUT_MS), 120000);
const again = () => (Date.now() > end ? process.exit(1) : setTimeout(attempt, 500));
function attempt() {
  const req = http.get({ host: process.env.MOVE_SOURCE, port: ${PORT}, path: '/archive', headers: { authorization: 'Bearer ' + process.env.MOVE_TOKEN } }, (res) => {
    if (res.statusCode !== 200) { res.resume(); return again(); }
    const hash = createHash('sha256');
    const tar = spawn('tar', ['-C', '/data', '-xf', '-'], { stdio: ['pipe', 'inherit', 'inherit'] });
    res.on('data', (c) => hash.update(c));
    res.pipe(tar.stdin);
    res.on('aborted', () => process.exit(1));
    tar.on('close', (code) => {
      const whole = res.complete && res.trailers['x-sha256'] === hash.digest('hex');
      if (!whole) console.error('the copy was cut short or altered');
      process.exit(code === 0 && whole ? 0 : 1);
    });
  });
  req.on('error', again);
}
attempt();
process.on('SIGTERM', () => process.exit(143));
`;

export interface Move {
  instanceId: string;
  userId: string;
  scope: string;
  /** The instance's image (by id): it has node and tar, and its /data ownership. */
  image: string;
  from: string;
  to: string;
  timeoutMs: number;
}

/** The overlay a move's two jobs talk on: only they are on it. Made again if a crash lost it; removed with the instance. */
async function ensureMoveNetwork(engine: DockerEngine, m: Move): Promise<void> {
  try {
    await engine.run('network create', (abortSignal) =>
      engine.docker.createNetwork(
        o({ Name: networkName(m.instanceId), Driver: 'overlay', Attachable: false, CheckDuplicate: true, Labels: labels(m), abortSignal }) as never,
      ),
    );
  } catch (err) {
    if (dockerStatus(err) !== 409) throw err;
  }
}

/** Resolves true once the volume is whole on the new node; false when the copy failed (the old volume is untouched). */
export async function copyVolume(engine: DockerEngine, m: Move): Promise<boolean> {
  await ensureMoveNetwork(engine, m);
  const token = randomBytes(24).toString('hex');
  const stamp = Date.now().toString(36);
  const source = `agenthost-send-${m.instanceId.slice(-20)}-${stamp}`;
  const volume = (readOnly: boolean) => ({
    Type: 'volume',
    Source: volumeName(m.instanceId),
    Target: '/data',
    ReadOnly: readOnly,
    VolumeOptions: { NoCopy: false, Labels: labels(m), DriverConfig: { Name: 'local' } },
  });
  const container = (script: string, readOnly: boolean, env: Record<string, string>) => ({
    Image: m.image,
    User: AGENT_USER,
    Command: ['/usr/local/bin/node', '-e', script],
    Env: Object.entries({ ...env, MOVE_TOKEN: token }).map(([k, v]) => `${k}=${v}`),
    ReadOnly: true,
    CapabilityDrop: ['ALL'],
    Mounts: [volume(readOnly), { Type: 'tmpfs', Target: '/tmp', TmpfsOptions: { SizeBytes: 16 * 1024 * 1024 } }],
  });
  const networks = [networkName(m.instanceId)];
  const sender = await startJob(engine, {
    name: source,
    scope: m.scope,
    node: m.from,
    networks,
    timeoutMs: m.timeoutMs,
    container: container(SEND, true, { MOVE_TIMEOUT_MS: String(m.timeoutMs) }),
  });
  try {
    return await runJob(
      engine,
      {
        name: `agenthost-receive-${m.instanceId.slice(-20)}-${stamp}`,
        scope: m.scope,
        node: m.to,
        networks,
        timeoutMs: m.timeoutMs,
        container: container(RECEIVE, false, { MOVE_SOURCE: source, MOVE_TIMEOUT_MS: String(m.timeoutMs) }),
      },
      sender,
    );
  } finally {
    await removeJob(engine, sender);
  }
}
