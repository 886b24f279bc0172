import { setTimeout as sleep } from 'node:timers/promises';
import net from 'node:net';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Session } from '@agenthost/testkit';
import { instanceStack, receiverTls, startReceiver, type Received } from '@agenthost/testkit';
import { openEvents } from './sse-client.ts';

// A create its user was refused, or that failed and was rolled back, was never shown to them as created: no
// instance.deleted reaches their webhooks or their event stream for it (docs/decisions/0053-a-refused-create-purges-its-keys.md).
// A real delete of a real instance still sends one, exactly once.

const PORTS: [number, number] = [19710, 19718];
const RECEIVER_PORT = 19719;
let sys: Awaited<ReturnType<typeof instanceStack>>;
let receiver: Awaited<ReturnType<typeof startReceiver>>;

beforeAll(async () => {
  const tls = receiverTls(['localhost']);
  receiver = await startReceiver(RECEIVER_PORT, tls);
  sys = await instanceStack(
    'hooks-refused',
    PORTS,
    { WEBHOOK_ALLOW_HOSTS: 'localhost', WEBHOOK_CA_FILE: tls.caFile, WEBHOOK_POLL_MS: '500' },
    // One instance per pro subscriber, so a second create is refused.
    { TIER_LIMITS_JSON: JSON.stringify({ pro: { instances: 1, memory_mb: 256, cpus: 0.5, pids: 64 } }) },
  );
}, 240_000);

afterAll(async () => {
  await sys?.stop();
  await receiver?.close();
});

type Body = { type: string; timestamp: string; data: Record<string, unknown> };
const EVENTS = ['instance.created', 'instance.status', 'instance.deleted'];

/** A subscriber with a webhook endpoint of its own and its user-wide event stream open. */
async function watched(name: string) {
  const s: Session = await sys.subscriber();
  const hook = (await s.api.post('/webhooks', { url: `https://localhost:${RECEIVER_PORT}/${name}`, events: EVENTS })).body as { secret: string };
  const stream = await openEvents(`${sys.stack.baseUrl}/webhooks/events`, s.token);
  expect(stream.status).toBe(200);
  await stream.until((e) => e.event === 'ready');
  const hooks = () => receiver.received.filter((r: Received) => r.path === `/${name}`).map((r) => new Webhook(hook.secret).verify(r.body, r.headers) as Body);
  return {
    s,
    stream,
    hooks,
    /** The instance ids of every instance.deleted the user was sent, by webhook and on the stream. */
    deleted: () => ({
      webhooks: hooks()
        .filter((e) => e.type === 'instance.deleted')
        .map((e) => e.data.instance_id),
      stream: stream.events.filter((e) => e.event === 'instance.deleted').map((e) => e.data.data.instance_id),
    }),
  };
}

/** A real instance of the user's, deleted: its instance.deleted is the one the user must get, after anything earlier. */
async function createAndDelete(u: Awaited<ReturnType<typeof watched>>): Promise<string> {
  const c = await u.s.api.post('/instance/create', { framework: 'openclaw' });
  expect(c.status, c.text).toBe(200);
  const id = c.body.instance_id as string;
  expect((await u.s.api.del(`/instance/delete/${id}`)).status).toBe(200);
  await receiver.until(() => u.hooks().find((e) => e.type === 'instance.deleted' && e.data.instance_id === id));
  await u.stream.until((e) => e.event === 'instance.deleted' && e.data.data.instance_id === id);
  return id;
}

describe('webhooks and the event stream of a refused or rolled-back create', () => {
  it('a create refused by the tier sends no instance.deleted', async () => {
    const alice = await watched('alice');
    const first = await alice.s.api.post('/instance/create', { framework: 'openclaw' });
    expect(first.status, first.text).toBe(200);
    const refused = await alice.s.api.post('/instance/create', { framework: 'openclaw' });
    expect(refused.body).toMatchObject({ code: 'INSTANCE_LIMIT_EXCEEDED' });
    const firstId = first.body.instance_id as string;
    expect((await alice.s.api.del(`/instance/delete/${firstId}`)).status).toBe(200);
    await receiver.until(() => alice.hooks().find((e) => e.type === 'instance.deleted'));
    await alice.stream.until((e) => e.event === 'instance.deleted');
    const later = await createAndDelete(alice);
    expect(alice.deleted()).toEqual({ webhooks: [firstId, later], stream: [firstId, later] });
    await alice.stream.close();
  }, 180_000);

  it('a create rolled back (Docker could not start it) sends no instance.deleted', async () => {
    const bob = await watched('bob');
    // The port its lease gets (the lowest of the range, all free), held where Docker publishes it: the start fails.
    const taken = net.createServer((socket) => socket.destroy()); // a probe that connects must not keep close() waiting
    await new Promise<void>((resolve, reject) => taken.once('error', reject).listen(PORTS[0], '127.0.0.1', resolve));
    try {
      const failed = await bob.s.api.post('/instance/create', { framework: 'openclaw' });
      expect(failed.status, failed.text).toBe(503);
      expect((await bob.s.api.get('/instance/list')).body.instances).toEqual([]);
      // Undone by the reconciler (RECONCILE_INTERVAL_SECONDS 5): its row goes last.
      const db = new pg.Client({ connectionString: sys.stack.db.url });
      await db.connect();
      try {
        const left = async () => (await db.query('select id from provisioner.instances where user_id = $1', [bob.s.user_id])).rowCount;
        for (const deadline = Date.now() + 30_000; (await left()) !== 0 && Date.now() < deadline; ) await sleep(250);
        expect(await left()).toBe(0);
      } finally {
        await db.end();
      }
    } finally {
      await new Promise((r) => taken.close(r));
    }
    const id = await createAndDelete(bob);
    expect(bob.deleted()).toEqual({ webhooks: [id], stream: [id] });
    console.log(
      `[refused-create] bob's webhooks: ${bob
        .hooks()
        .map((e) => `${e.type}${e.type === 'instance.status' ? `:${String(e.data.status)}` : ''}:${String(e.data.instance_id)}`)
        .join(', ')}`,
    );
    await bob.stream.close();
  }, 180_000);
});
