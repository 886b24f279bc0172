import { setTimeout as sleep } from 'node:timers/promises';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureEventStream } from '@agenthost/shared';
import { adminUrl, freePort, signIn, startStack, waitFor, type Stack } from '@agenthost/testkit';

/** A TCP relay in front of Postgres that a test can cut and restore, to take the database away from one service. */
async function relay(target: { host: string; port: number }) {
  const port = await freePort();
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  const open = () =>
    new Promise<void>((resolve) => {
      server = net.createServer((client) => {
        const upstream = net.connect(target.port, target.host);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => {});
        }
        client.pipe(upstream).pipe(client);
      });
      server.listen(port, '127.0.0.1', () => resolve());
    });
  await open();
  return {
    port,
    async cut() {
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      for (const s of sockets) s.destroy();
    },
    restore: open,
  };
}

let stack: Stack;
let pg: Awaited<ReturnType<typeof relay>>;

beforeAll(async () => {
  const admin = new URL(adminUrl);
  pg = await relay({ host: admin.hostname, port: Number(admin.port || 5432) });
  stack = await startStack({ services: ['auth'] });
  // A second auth replica reaches the database only through the relay; the first one is stopped so it serves alone.
  const viaRelay = new URL(stack.db.urlFor('auth'));
  viaRelay.port = String(pg.port);
  await stack.services.get('auth')!.stop();
  stack.env.DATABASE_URL = viaRelay.toString();
  await stack.addReplica('auth', 'auth-relay');
});

afterAll(async () => {
  await stack?.stop();
  await pg?.cut();
});

const nonce = (address: string) => stack.api.get(`/auth/nonce?wallet_address=${address}`);

describe('infrastructure going away', () => {
  it('answers a fast 503 while NATS is down and recovers by itself when it is back', async () => {
    const s = await signIn(stack.api);
    // The event stream, as the services that publish make it: readiness reports it answering, then not.
    const nc = await stack.nats.connect();
    await ensureEventStream(nc);
    await nc.close();
    expect((await stack.api.get('/health/ready')).body.events).toBe('ok');
    await stack.nats.pause();
    await sleep(300); // the clients notice the closed socket
    const started = Date.now();
    const res = await nonce(s.wallet.address);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ error: expect.stringMatching(/NATS/), code: 'SERVICE_UNAVAILABLE', status: 503 });
    const ready = await stack.api.get('/health/ready');
    expect([ready.status, ready.body.events]).toEqual([503, 'unavailable']);

    await stack.nats.restart();
    await waitFor('nonces again after NATS is back', async () => (await nonce(s.wallet.address)).status === 200, 15_000, 200);
    expect((await signIn(stack.api)).token).toBeTruthy();
  });

  it("answers 503, not 500, while a service's database is unreachable, and recovers when it is back", async () => {
    const s = await signIn(stack.api);
    await pg.cut();
    const started = Date.now();
    const res = await nonce(s.wallet.address);
    expect(Date.now() - started).toBeLessThan(6000);
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ error: expect.stringMatching(/database/), code: 'SERVICE_UNAVAILABLE', status: 503 });

    await pg.restore();
    await waitFor('nonces again after the database is back', async () => (await nonce(s.wallet.address)).status === 200, 15_000, 200);
  });
});
