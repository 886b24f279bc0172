import { setTimeout as sleep } from 'node:timers/promises';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts, publishEvent } from '@agenthost/shared';
import { repoRoot, type Session, instanceStack, receiverTls, startReceiver } from '@agenthost/testkit';
import { signedInHome } from './cli-home.ts';

// `agenthost webhooks listen` and `webhooks test` as a developer runs them, through bin/agenthost against a whole
// stack with real containers: the local receiver is plain http on loopback (what the gateway itself refuses), and
// every request it gets is verified with the npm package standardwebhooks and the secret the CLI printed.

const exec = promisify(execFile);
const wrapper = path.join(repoRoot, 'bin/agenthost');
/** The https receiver of the registered endpoint (`webhooks test`), allowed and trusted through the gateway's settings. */
const REGISTERED_PORT = 19430;
let sys: Awaited<ReturnType<typeof instanceStack>>;
let registered: Awaited<ReturnType<typeof startReceiver>>;
let alice: Session;
let home: string;
const children: ChildProcess[] = [];

/** What a developer's local receiver got: one request each. */
interface Got {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}
const got: Got[] = [];
let local: Server;
let localUrl: string;

beforeAll(async () => {
  local = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
  localUrl = `http://localhost:${(local.address() as AddressInfo).port}/hooks`;
  const tls = receiverTls(['localhost']);
  registered = await startReceiver(REGISTERED_PORT, tls);
  sys = await instanceStack('cli-webhooks', [19431, 19439], { WEBHOOK_ALLOW_HOSTS: 'localhost', WEBHOOK_CA_FILE: tls.caFile });
  alice = await sys.subscriber();
  home = signedInHome(alice, 'cli-webhooks');
}, 240_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill();
  await sys?.stop();
  await registered?.close();
  await new Promise<void>((resolve) => (local ? local.close(() => resolve()) : resolve()));
  if (home) rmSync(home, { recursive: true, force: true });
});

const env = () => ({ PATH: '/usr/local/bin:/usr/bin:/bin', AGENTHOST_HOME: home, AGENTHOST_API_URL: sys.stack.baseUrl });

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec('bash', [wrapper, ...args], { env: env(), timeout: 180_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Waits for `pick` to find something, looking again every 250 ms for up to a minute. */
async function until<T>(pick: () => T | undefined, what: string): Promise<T> {
  for (let i = 0; i < 240; i++) {
    const found = pick();
    if (found !== undefined) return found;
    await sleep(250);
  }
  throw new Error(`not seen in a minute: ${what}`);
}

/** The verified payload of a request, as a receiver checks it (standardwebhooks throws on a bad signature or time). */
const verified = (secret: string, r: Got) =>
  new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as { type: string; timestamp: string; data: Record<string, unknown> };

describe('agenthost webhooks listen', () => {
  it('forwards live events to a local URL signed with the secret it printed, resumes after a dropped stream, and stops on Ctrl-C', async () => {
    const child = spawn('bash', [wrapper, 'webhooks', 'listen', '--forward-to', localUrl, '--events', 'instance.created,instance.status'], { env: env() });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await until(() => {
      if (child.exitCode !== null) throw new Error(`listen exited ${child.exitCode}: ${stderr}`);
      return /^ready: /m.test(stdout) || undefined;
    }, 'the ready line');
    const secret = /signing secret: (whsec_\S+)/.exec(stdout)?.[1];
    expect(secret).toMatch(/^whsec_/);

    const created = await cli('create', '--name', 'hooked', '--wait');
    expect(created.code, created.stderr).toBe(0);
    const id = JSON.parse(created.stdout.slice(0, created.stdout.lastIndexOf('}') + 1)).instance_id as string;
    const mine = () => got.map((r) => ({ r, p: verified(secret!, r) })).filter(({ p }) => p.data.instance_id === id);
    const running = await until(() => mine().find(({ p }) => p.type === 'instance.status' && p.data.status === 'running'), 'instance.status running');
    expect(running.r.path).toBe('/hooks');
    expect(running.p.data).toMatchObject({ instance_id: id, status: 'running' });
    expect(mine().some(({ p }) => p.type === 'instance.created')).toBe(true);
    // A receiver holding another secret refuses the same request.
    expect(() => new Webhook(`whsec_${Buffer.alloc(24, 7).toString('base64')}`).verify(running.r.body, running.r.headers as Record<string, string>)).toThrow();
    // One line per event: its type, its webhook-id and the local receiver's answer.
    expect(stdout).toContain(`instance.status ${running.r.headers['webhook-id']} 204`);

    // The gateway goes away; an event happens meanwhile; the CLI resumes after the last event it had (no new
    // `ready`, which only a stream opened without Last-Event-ID sends) and forwards the event it missed.
    const gateway = sys.stack.gateways[0]!;
    await gateway.stop();
    const provisioner = await sys.stack.nats.connect('provisioner');
    await publishEvent(provisioner, contracts.provisioner.instanceStatusChanged, {
      instance_id: id,
      user_id: alice.user_id,
      status: 'running',
      at: new Date().toISOString(),
      generation: 1,
      seq: 1000,
    });
    await provisioner.drain();
    await gateway.start();
    await until(() => mine().find(({ p }) => p.data.seq === 1000), 'the event published while the gateway was down');
    expect(stdout.match(/^ready: /gm)).toHaveLength(1);
    const ids = got.map((r) => r.headers['webhook-id']);
    expect(new Set(ids).size).toBe(ids.length); // nothing forwarded twice across the resume

    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(stdout).toMatch(/stopped\n$/);
  }, 300_000);
});

describe('agenthost webhooks test', () => {
  it('has the gateway send a signed webhook.test event to a registered endpoint, and says when the endpoint refused it', async () => {
    const hook = (await alice.api.post('/webhooks', { url: `https://localhost:${REGISTERED_PORT}/registered`, events: ['instance.deleted'] })).body as {
      id: string;
      secret: string;
    };
    expect(hook.secret).toMatch(/^whsec_/);

    const sent = await cli('webhooks', 'test', hook.id);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toMatch(/^webhook\.test msg_\w+ delivered \(HTTP 200\)$/m);
    const delivery = await registered.until((all) => all.find((r) => r.path === '/registered'));
    const payload = new Webhook(hook.secret).verify(delivery.body, delivery.headers) as { type: string; data: { webhook_id: string } };
    expect(payload).toMatchObject({ type: 'webhook.test', data: { webhook_id: hook.id } });
    expect(sent.stdout).toContain(delivery.headers['webhook-id']);

    registered.answer('/registered', 500);
    const refused = await cli('webhooks', 'test', hook.id);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/^webhook\.test msg_\w+ failed \(HTTP 500\)$/m);

    const unknown = await cli('webhooks', 'test', 'wh_0123456789abcdef0123');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/\(404 WEBHOOK_NOT_FOUND\)/);
  }, 120_000);
});
