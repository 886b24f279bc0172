import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import {
  startStack,
  type Stack,
  cleanupDocker,
  docker,
  gatewayEnv,
  natsClient,
  newUser,
  provisionerEnv,
  testNetwork,
  waitFor,
  type Nats,
} from '@agenthost/testkit';

const P = contracts.provisioner;
const network = testNetwork('down');
const DOCKER_SOCKET = '/var/run/docker.sock';
// The provisioner's Docker timeout here (20 s by default). Tight enough that a hang shows within seconds; loose enough
// that a real create on a loaded CI machine (2 cores, load 10+) is not taken for a hung engine, as 2 s once was.
const DOCKER_TIMEOUT_MS = 4000;

/**
 * The provisioner talks to Docker through this proxy, which the test can take down (socket gone:
 * connection refused) or hang (connections accepted, never answered: a SIGSTOPped dockerd) without
 * disturbing the real engine that other test files use.
 */
class DockerProxy {
  readonly socket = path.join(os.tmpdir(), `ah-docker-${randomBytes(4).toString('hex')}.sock`);
  mode: 'pass' | 'hang' = 'pass';
  private server: net.Server | undefined;
  private readonly conns = new Set<net.Socket>();

  async up(): Promise<void> {
    rmSync(this.socket, { force: true });
    this.server = net.createServer((client) => {
      this.conns.add(client);
      client.on('close', () => this.conns.delete(client));
      client.on('error', () => {});
      if (this.mode === 'hang') return; // accepted, never answered
      const upstream = net.connect(DOCKER_SOCKET);
      this.conns.add(upstream);
      upstream.on('close', () => this.conns.delete(upstream));
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((r) => this.server!.listen(this.socket, r));
  }

  /** Docker gone: the socket disappears and every open connection breaks. */
  async down(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    for (const c of this.conns) c.destroy();
    if (s) await new Promise<void>((r) => s.close(() => r()));
    rmSync(this.socket, { force: true });
  }

  /** Docker hung: connections are accepted but nothing answers (open ones stall too). */
  hang(): void {
    this.mode = 'hang';
    for (const c of this.conns) c.pause();
  }

  async pass(): Promise<void> {
    this.mode = 'pass';
    for (const c of this.conns) c.destroy();
    if (!this.server) await this.up();
  }
}

let stack: Stack;
let n: Nats;
const proxy = new DockerProxy();

beforeAll(async () => {
  await cleanupDocker(network);
  await proxy.up();
  stack = await startStack({
    services: ['keyvault', 'provisioner'],
    serviceEnv: {
      provisioner: provisionerEnv({
        network,
        ports: [18250, 18269],
        extra: { DOCKER_HOST: `unix://${proxy.socket}`, DOCKER_TIMEOUT_MS: String(DOCKER_TIMEOUT_MS) },
      }),
      gateway: gatewayEnv,
    },
  });
  n = await natsClient(stack.nats);
});

afterAll(async () => {
  await n?.close();
  await stack?.stop();
  await proxy.down();
  await cleanupDocker(network);
});

const timed = async <T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> => {
  const t = performance.now();
  const value = await fn();
  return { ms: performance.now() - t, value };
};

const createRunning = async (user_id: string) => {
  const c = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
  await waitFor('running', async () => (await n.call(P.get, { user_id, instance_id: c.instance_id })).status === 'running');
  return c;
};

describe('when Docker is unavailable', () => {
  it('answers a fast 503 DOCKER_UNAVAILABLE while the engine is gone, and recovers when it is back', async () => {
    const user_id = newUser();
    const first = await createRunning(user_id);

    await proxy.down();
    for (let i = 0; i < 3; i++) {
      const r = await timed(() => n.fail(P.create, { user_id, tier: 'pro', framework: 'openclaw' }));
      expect(r.value).toMatchObject({ code: 'DOCKER_UNAVAILABLE', status: 503 });
      expect(r.ms).toBeLessThan(500);
    }
    for (const c of [P.restart, P.stop, P.remove] as const) {
      const r = await timed(() => n.fail(c, { user_id, instance_id: first.instance_id }));
      expect(r.value, c.subject).toMatchObject({ code: 'DOCKER_UNAVAILABLE', status: 503 });
      expect(r.ms).toBeLessThan(500);
    }
    // Reads still answer from the database.
    expect((await n.call(P.get, { user_id, instance_id: first.instance_id })).status).toBe('running');
    expect((await n.call(P.list, { user_id })).instances).toHaveLength(1);

    await proxy.pass();
    const second = await createOnceDockerIsBack(user_id);
    // The instance created before the outage kept running throughout.
    expect((await n.call(P.get, { user_id, instance_id: first.instance_id })).status).toBe('running');
    await n.call(P.remove, { user_id, instance_id: first.instance_id });
    await n.call(P.remove, { user_id, instance_id: second.instance_id });
  });

  it('detects a hung engine (accepts, never answers) within seconds and then fails fast', async () => {
    const user_id = newUser();
    const c = await createRunning(user_id);
    proxy.hang();
    const started = Date.now();
    // No call may wait longer than the Docker timeout plus slack...
    const slow = await timed(() => n.fail(P.create, { user_id, tier: 'pro', framework: 'openclaw' }));
    expect(slow.value).toMatchObject({ code: 'DOCKER_UNAVAILABLE', status: 503 });
    expect(slow.ms).toBeLessThan(DOCKER_TIMEOUT_MS + 1500);
    // ...and soon every call fails at once.
    await waitFor(
      'fast 503',
      async () => {
        const r = await timed(() => n.fail(P.restart, { user_id, instance_id: c.instance_id }));
        expect(r.value).toMatchObject({ code: 'DOCKER_UNAVAILABLE' });
        return r.ms < 200;
      },
      15_000,
      100,
    );
    expect(Date.now() - started).toBeLessThan(15_000);

    await proxy.pass();
    await waitFor(
      'recovered',
      async () => {
        try {
          await n.call(P.restart, { user_id, instance_id: c.instance_id });
          return true;
        } catch (err) {
          if ((err as { code?: string }).code === 'DOCKER_UNAVAILABLE') return undefined;
          throw err;
        }
      },
      15_000,
      200,
    );
    await waitFor('running after restart', async () => (await n.call(P.get, { user_id, instance_id: c.instance_id })).status === 'running');
    await n.call(P.remove, { user_id, instance_id: c.instance_id });
    // The create that failed while Docker hung was left for the reconciler: nothing of it remains.
    await waitFor(
      'no leftovers',
      async () => {
        const containers = await docker('ps', '-aq', '--filter', `label=agenthost.scope=${network}`);
        const volumes = await docker('volume', 'ls', '-q', '--filter', `label=agenthost.scope=${network}`);
        return containers === '' && volumes === '';
      },
      20_000,
      250,
    );
  });

  it('starts without Docker, answers 503, and sets up the network once Docker appears', async () => {
    const p = stack.services.get('provisioner')!;
    await p.stop();
    await proxy.down();
    await cleanupDocker(network); // the network must be created again on recovery
    await p.start();
    const user_id = newUser();
    const r = await timed(() => n.fail(P.create, { user_id, tier: 'pro', framework: 'openclaw' }));
    expect(r.value).toMatchObject({ code: 'DOCKER_UNAVAILABLE', status: 503 });
    expect(r.ms).toBeLessThan(500);
    await proxy.pass();
    const c = await createOnceDockerIsBack(user_id);
    await n.call(P.remove, { user_id, instance_id: c.instance_id });
  });
});

/** Docker is reachable again: a create stops answering DOCKER_UNAVAILABLE within seconds, and its instance runs. */
async function createOnceDockerIsBack(user_id: string) {
  const created = await waitFor(
    'a create after Docker came back',
    async () => {
      try {
        return await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
      } catch (err) {
        if ((err as { code?: string }).code === 'DOCKER_UNAVAILABLE') return undefined;
        throw err;
      }
    },
    15_000,
    200,
  );
  await waitFor('running', async () => (await n.call(P.get, { user_id, instance_id: created.instance_id })).status === 'running');
  return created;
}
