import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { PassThrough } from 'node:stream';
import type { DockerEngine } from '../docker/engine.ts';
import { o } from '../docker/call.ts';
import { AGENT_USER, labels } from '../docker/spec.ts';
import { runJob } from './janitor.ts';
import { volumeName } from './spec.ts';

/**
 * An instance volume's files to and from this provisioner, wherever the volume's node is: the mover's way
 * (mover.ts), with this provisioner as the other end. A one-shot swarm job on the volume's node, on the
 * platform's overlay network, streams one tar to (backup) or from (restore) an HTTP listener this provisioner
 * opens for that one transfer with a one-time token. The job runs the instance's own image as the agent's user
 * with every capability dropped; a SHA-256 of the stream sent as an HTTP trailer proves the copy whole.
 */

const SEND = `
const http = require('node:http');
const { createHash } = require('node:crypto');
const { spawn } = require('node:child_process');
const hash = createHash('sha256');
const req = http.request({ host: process.env.T_HOST, port: Number(process.env.T_PORT), path: '/archive', method: 'PUT',
  headers: { authorization: 'Bearer ' + process.env.T_TOKEN, 'content-type': 'application/x-tar', trailer: 'x-sha256' } }, (res) => {
  res.resume();
  res.on('end', () => process.exit(res.statusCode === 200 ? 0 : 1));
});
req.on('error', () => process.exit(1));
const tar = spawn('tar', ['-C', '/data', '-cf', '-', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
tar.stdout.on('data', (c) => { hash.update(c); if (!req.write(c)) { tar.stdout.pause(); req.once('drain', () => tar.stdout.resume()); } });
tar.on('close', (code) => {
  if (code !== 0) { req.destroy(); process.exit(1); }
  req.addTrailers({ 'x-sha256': hash.digest('hex') });
  req.end();
});
setTimeout(() => process.exit(1), Number(process.env.T_TIMEOUT_MS));
`;

const RECEIVE = `
const http = require('node:http');
const { createHash } = require('node:crypto');
const { spawn } = require('node:child_process');
http.get({ host: process.env.T_HOST, port: Number(process.env.T_PORT), path: '/archive', headers: { authorization: 'Bearer ' + process.env.T_TOKEN } }, (res) => {
  if (res.statusCode !== 200) process.exit(1);
  const hash = createHash('sha256');
  const tar = spawn('tar', ['-C', '/data', '-xf', '-'], { stdio: ['pipe', 'inherit', 'inherit'] });
  res.on('data', (c) => hash.update(c));
  res.pipe(tar.stdin);
  res.on('aborted', () => process.exit(1));
  tar.on('close', (code) => process.exit(code === 0 && res.complete && res.trailers['x-sha256'] === hash.digest('hex') ? 0 : 1));
}).on('error', () => process.exit(1));
setTimeout(() => process.exit(1), Number(process.env.T_TIMEOUT_MS));
`;

export interface Transfer {
  instanceId: string;
  userId: string;
  scope: string;
  /** The instance's image (by id): it has node and tar, and its /data ownership. */
  image: string;
  /** The node the volume is on. */
  node: string;
  timeoutMs: number;
}

/** The volume's files as one tar into `sink`; throws when the copy was not whole (the sink's output is then not kept). */
export async function exportFromNode(engine: DockerEngine, t: Transfer, sink: (tar: NodeJS.ReadableStream) => Promise<void>): Promise<void> {
  let sunk: Promise<void> | undefined;
  await transfer(engine, t, 'send', (req, res) => {
    const hash = createHash('sha256');
    const tar = new PassThrough();
    req.on('data', (c: Buffer) => hash.update(c));
    req.pipe(tar);
    req.on('close', () => {
      if (!req.complete) tar.destroy(new Error('the copy of the volume was cut short'));
    });
    sunk = sink(tar).then(() => {
      // The trailer is read once the body has ended, which the sink waited for.
      if (!req.complete || req.trailers['x-sha256'] !== hash.digest('hex')) throw new Error('the copy of the volume was cut short or altered');
    });
    sunk.then(
      () => res.writeHead(200).end(),
      () => res.writeHead(500).end(),
    );
  });
  if (!sunk) throw new Error('the volume was never sent');
  await sunk;
}

/** Fill the instance's volume on its node (made there if missing) from a tar. */
export async function importToNode(engine: DockerEngine, t: Transfer, tar: NodeJS.ReadableStream): Promise<void> {
  await transfer(engine, t, 'receive', (_req, res) => {
    const hash = createHash('sha256');
    res.writeHead(200, { 'content-type': 'application/x-tar', trailer: 'x-sha256' });
    tar.on('data', (c: Buffer) => hash.update(c));
    tar.on('end', () => {
      res.addTrailers({ 'x-sha256': hash.digest('hex') });
      res.end();
    });
    tar.on('error', () => res.destroy());
    tar.pipe(res, { end: false });
  });
}

/**
 * Opens the one-transfer listener, runs the job on the volume's node against it, and closes it. The job reaches
 * this provisioner at its address on the platform's overlay (read from its own container, which this manager's
 * engine runs); only the first request with the token is served.
 */
async function transfer(
  engine: DockerEngine,
  t: Transfer,
  mode: 'send' | 'receive',
  serve: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<void> {
  const self = await engine.run('container inspect', (abortSignal) => engine.docker.getContainer(hostname()).inspect(o({ abortSignal })));
  const overlay = Object.values(self.NetworkSettings.Networks ?? {}).find((n) => n.IPAddress && n.NetworkID);
  if (!overlay) throw new Error('this provisioner is on no overlay network a transfer job could reach it on');
  const token = randomBytes(24).toString('hex');
  let served = false;
  const server = createServer((req, res) => {
    const wanted = mode === 'send' ? 'PUT' : 'GET';
    if (served || req.method !== wanted || req.url !== '/archive' || req.headers.authorization !== `Bearer ${token}`) return void res.writeHead(403).end();
    served = true;
    serve(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, overlay.IPAddress, resolve));
  try {
    const stamp = Date.now().toString(36);
    const ok = await runJob(engine, {
      name: `agenthost-${mode === 'send' ? 'backup' : 'restore'}-${t.instanceId.slice(-20)}-${stamp}`,
      scope: t.scope,
      node: t.node,
      networks: [overlay.NetworkID!],
      timeoutMs: t.timeoutMs,
      container: {
        Image: t.image,
        User: AGENT_USER,
        Command: ['/usr/local/bin/node', '-e', mode === 'send' ? SEND : RECEIVE],
        Env: Object.entries({
          T_HOST: overlay.IPAddress,
          T_PORT: String((server.address() as AddressInfo).port),
          T_TOKEN: token,
          T_TIMEOUT_MS: String(t.timeoutMs),
        }).map(([k, v]) => `${k}=${v}`),
        ReadOnly: true,
        CapabilityDrop: ['ALL'],
        Mounts: [
          {
            Type: 'volume',
            Source: volumeName(t.instanceId),
            Target: '/data',
            ReadOnly: mode === 'send',
            VolumeOptions: { NoCopy: false, Labels: labels(t), DriverConfig: { Name: 'local' } },
          },
          { Type: 'tmpfs', Target: '/tmp', TmpfsOptions: { SizeBytes: 16 * 1024 * 1024 } },
        ],
      },
    });
    if (!ok) throw new Error(`the ${mode === 'send' ? 'backup' : 'restore'} job of ${t.instanceId} failed on its node`);
  } finally {
    server.closeAllConnections();
    server.close();
  }
}
