import { setTimeout as sleep } from 'node:timers/promises';
import type { NatsConnection } from 'nats';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts, publishEvent } from '@agenthost/shared';
import { chainClient, signIn, startStack, subscribe, type Session, type Stack, receiverTls, startReceiver, type Received, waitFor } from '@agenthost/testkit';

// Outbound webhooks (Standard Webhooks) against a real https receiver trusted through WEBHOOK_CA_FILE, real JetStream
// events published under the provisioner's and billing-chain's own NATS identities, and real Postgres.

const PORT = 19300;
/** A subscribe pays for 30 days (the subscription program's period). */
const PERIOD_SECONDS = 30 * 86_400;
const PER_USER = 4;
let stack: Stack;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let provisionerBus: NatsConnection;
let alice: Session;
let bob: Session;
let admin: pg.Client;

let tlsFiles: ReturnType<typeof receiverTls>;

beforeAll(async () => {
  const tls = (tlsFiles = receiverTls(['localhost', 'vm']));
  receiver = await startReceiver(PORT, tls);
  stack = await startStack({
    services: ['auth', 'billing-chain'],
    devchain: true,
    // Two replicas share the durable consumers and the delivery table: each event still reaches each endpoint once.
    gateways: 2,
    serviceEnv: {
      'billing-chain': { POLL_INTERVAL_SECONDS: '0.5' },
      gateway: {
        WEBHOOK_ALLOW_HOSTS: 'localhost',
        WEBHOOK_CA_FILE: tls.caFile,
        WEBHOOK_RETRY_BASE_MS: '300',
        WEBHOOK_POLL_MS: '500',
        WEBHOOKS_PER_USER: String(PER_USER),
      },
    },
  });
  provisionerBus = await stack.nats.connect('provisioner');
  admin = new pg.Client({ connectionString: stack.db.url });
  await admin.connect();
  alice = await signIn(stack.api);
  bob = await signIn(stack.api);
}, 240_000);

afterAll(async () => {
  await admin?.end();
  await provisionerBus?.drain();
  await stack?.stop();
  await receiver?.close();
});

const hookUrl = (name: string) => `https://localhost:${PORT}/${name}`;
const at = (p: string) => (all: Received[]) => all.filter((r) => r.path === p);
let seq = 0;

/** A status change of an instance, as the provisioner publishes it. */
async function statusEvent(userId: string, instanceId: string, status: 'running' | 'stopped' = 'running') {
  seq += 1;
  await publishEvent(provisionerBus, contracts.provisioner.instanceStatusChanged, {
    instance_id: instanceId,
    user_id: userId,
    status,
    at: new Date().toISOString(),
    generation: 1,
    seq,
  });
}

async function createHook(s: Session, name: string, events: string[] = ['instance.status']) {
  const r = await s.api.post('/webhooks', { url: hookUrl(name), events });
  expect(r.status, r.text).toBe(200);
  return r.body as { id: string; secret: string };
}

/** The request received at `path` whose event concerns `instanceId`. */
const eventFor = (p: string, instanceId: string) => (all: Received[]) =>
  at(p)(all).find((r) => (JSON.parse(r.body) as { data: { instance_id?: string } }).data.instance_id === instanceId);

describe('webhooks', () => {
  it('refuses http and private, loopback, link-local and unique-local targets, and names resolving to them', async () => {
    const refused = [
      `http://localhost:${PORT}/plain`,
      `https://127.0.0.1:${PORT}/loop`,
      'https://10.1.2.3/private',
      'https://169.254.169.254/latest/meta-data',
      'https://100.64.0.1/cgnat',
      'https://[::1]/v6-loopback',
      'https://[fd00::1]/unique-local',
      'https://[::ffff:127.0.0.1]/mapped',
      `https://vm:${PORT}/name-to-loopback`,
      'https://user:pass@example.com/credentials',
    ];
    for (const url of refused) {
      const r = await alice.api.post('/webhooks', { url, events: ['instance.status'] });
      expect({ url, status: r.status, code: r.body?.code }).toEqual({ url, status: 400, code: 'WEBHOOK_URL_REFUSED' });
      expect(r.body).toMatchObject({ error: expect.any(String), status: 400 });
    }
    expect((await alice.api.get('/webhooks')).body.webhooks).toEqual([]);
  });

  it('delivers an instance event signed by the Standard Webhooks spec, to its owner only', async () => {
    const a = await createHook(alice, 'alice');
    const b = await createHook(bob, 'bob');
    expect(a.secret).toMatch(/^whsec_/);
    // The secret is shown once: the list never carries it, and the database keeps it sealed.
    const list = await alice.api.get('/webhooks');
    expect(list.body.webhooks).toEqual([expect.objectContaining({ id: a.id, url: hookUrl('alice'), events: ['instance.status'] })]);
    expect(list.text).not.toContain(a.secret);
    const stored = await admin.query('select * from gateway.webhook_endpoints where id = $1', [a.id]);
    expect(JSON.stringify(stored.rows)).not.toContain(a.secret.slice('whsec_'.length));

    await statusEvent(alice.user_id, 'alice-one');
    await statusEvent(bob.user_id, 'bob-one');
    await statusEvent(alice.user_id, 'alice-two');
    const first = await receiver.until(eventFor('/alice', 'alice-one'));
    await receiver.until(eventFor('/alice', 'alice-two'));
    await receiver.until(eventFor('/bob', 'bob-one'));

    const body = new Webhook(a.secret).verify(first.body, first.headers) as { type: string; data: Record<string, unknown> };
    expect(body).toMatchObject({ type: 'instance.status', data: { instance_id: 'alice-one', status: 'running' } });
    expect(first.headers['webhook-id']).toMatch(/^msg_/);
    expect(() => new Webhook(b.secret).verify(first.body, first.headers)).toThrow();
    const aliceGot = at('/alice')(receiver.received).map((r) => (JSON.parse(r.body) as { data: { instance_id: string } }).data.instance_id);
    expect(aliceGot).not.toContain('bob-one');
    expect(aliceGot.sort()).toEqual(['alice-one', 'alice-two']);
    // The receiver has each body before its gateway records the 200 it answered: the log says delivered just after.
    const log = await waitFor(
      'both deliveries logged as delivered',
      async () => {
        const r = await alice.api.get(`/webhooks/${a.id}/deliveries`);
        expect(r.status).toBe(200);
        const done = r.body.deliveries.every((d: { status: string; last_status_code: number }) => d.status === 'delivered' && d.last_status_code === 200);
        return done ? r : undefined;
      },
      30_000,
      200,
    );
    expect(log.body.deliveries).toHaveLength(2);
    // Nobody else reads alice's log.
    expect((await bob.api.get(`/webhooks/${a.id}/deliveries`)).body.code).toBe('WEBHOOK_NOT_FOUND');
  });

  it('retries a delivery the receiver answered 500, with the same webhook-id, until it succeeds', async () => {
    const { id, secret } = (await alice.api.get('/webhooks')).body.webhooks[0] as { id: string; secret?: string };
    expect(secret).toBeUndefined();
    receiver.answer('/alice', 500, 500);
    await statusEvent(alice.user_id, 'alice-retry', 'stopped');
    const tries = await receiver.until((all) => {
      const got = all.filter((r) => eventFor('/alice', 'alice-retry')([r]));
      return got.length >= 3 ? got : undefined;
    });
    expect(new Set(tries.map((t) => t.headers['webhook-id'])).size).toBe(1);
    const log = (await alice.api.get(`/webhooks/${id}/deliveries`)).body.deliveries as Array<{
      id: string;
      status: string;
      attempts: number;
      last_status_code: number;
    }>;
    const d = await (async () => {
      for (;;) {
        const row = ((await alice.api.get(`/webhooks/${id}/deliveries`)).body.deliveries as typeof log).find((x) => x.id === tries[0]!.headers['webhook-id']);
        if (row?.status !== 'pending') return row;
        await sleep(200);
      }
    })();
    expect(d).toMatchObject({ status: 'delivered', attempts: 3, last_status_code: 200 });

    // Redelivery on request: the same webhook-id once more.
    const again = await alice.api.post(`/webhooks/${id}/deliveries/${d!.id}/redeliver`);
    expect(again.status).toBe(200);
    await receiver.until((all) => (all.filter((r) => r.headers['webhook-id'] === d!.id).length >= 4 ? true : undefined));
    expect((await alice.api.post(`/webhooks/${id}/deliveries/msg_00000000000000000000/redeliver`)).body.code).toBe('WEBHOOK_DELIVERY_NOT_FOUND');
  });

  it('signs with both secrets while a rotation overlaps', async () => {
    const hook = await createHook(bob, 'bob-rotating');
    const rotated = await bob.api.post(`/webhooks/${hook.id}/rotate`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(hook.secret);
    await statusEvent(bob.user_id, 'bob-rotated');
    const got = await receiver.until(eventFor('/bob-rotating', 'bob-rotated'));
    expect(got.headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(new Webhook(hook.secret).verify(got.body, got.headers)).toMatchObject({ data: { instance_id: 'bob-rotated' } });
    expect(new Webhook(rotated.body.secret as string).verify(got.body, got.headers)).toMatchObject({ data: { instance_id: 'bob-rotated' } });
    expect(() => new Webhook(`whsec_${Buffer.alloc(24, 7).toString('base64')}`).verify(got.body, got.headers)).toThrow();
  });

  it("tells a user of their subscription's registration, its coming end, its renewal and its cancellation", async () => {
    const carol = await signIn(stack.api);
    const hook = await createHook(carol, 'carol', [
      'subscription.registered',
      'subscription.expiring',
      'subscription.renewed',
      'subscription.expired',
      'subscription.cancelled',
    ]);
    await subscribe(stack, carol, { tier: 'pro', deposit: stack.chain!.prices.pro });
    const events = (all: Received[]) =>
      at('/carol')(all).map((r) => new Webhook(hook.secret).verify(r.body, r.headers) as { type: string; data: Record<string, unknown> });
    const of = (type: string) => (all: Received[]) => events(all).find((e) => e.type === type);
    const registered = await receiver.until(of('subscription.registered'));
    expect(registered.data).toMatchObject({ wallet_address: carol.wallet.address, tier: 'pro', is_active: true });
    expect(registered.data).not.toHaveProperty('user_id');

    // Two days before the end (chain time): announced once, with the days left.
    await stack.chain!.advanceClock(PERIOD_SECONDS - 2 * 86_400);
    expect((await receiver.until(of('subscription.expiring'))).data).toMatchObject({ wallet_address: carol.wallet.address, days_left: 2 });
    // Past the end: the keeper renews from the prepaid balance.
    await stack.chain!.advanceClock(2 * 86_400 + 60);
    expect((await receiver.until(of('subscription.renewed'))).data).toMatchObject({ is_active: true, cancelled: false });
    expect((await chainClient(stack).cancel(carol.wallet)).err).toBeNull();
    expect((await receiver.until(of('subscription.cancelled'))).data).toMatchObject({ cancelled: true });
    expect(events(receiver.received).filter((e) => e.type === 'subscription.expiring')).toHaveLength(1);
  });

  it('logs why an attempt failed when nothing answers, and keeps retrying until the receiver is back', async () => {
    const erin = await signIn(stack.api);
    // Nothing listens on the receiver's neighbour port yet.
    const r = await erin.api.post('/webhooks', { url: `https://localhost:${PORT + 1}/erin`, events: ['instance.status'] });
    expect(r.status, r.text).toBe(200);
    await statusEvent(erin.user_id, 'erin-one');
    const failed = await (async () => {
      for (;;) {
        const d = (
          (await erin.api.get(`/webhooks/${r.body.id}/deliveries`)).body.deliveries as Array<{
            id: string;
            status: string;
            attempts: number;
            last_error?: string;
          }>
        )[0];
        if (d && d.attempts >= 1 && d.last_error) return d;
        await sleep(200);
      }
    })();
    expect(failed).toMatchObject({ status: 'pending', last_error: 'ECONNREFUSED' });
    const late = await startReceiver(PORT + 1, tlsFiles);
    try {
      const got = await late.until((all) => all.find((x) => x.headers['webhook-id'] === failed.id));
      expect(new Webhook(r.body.secret as string).verify(got.body, got.headers)).toMatchObject({ data: { instance_id: 'erin-one' } });
    } finally {
      await late.close();
    }
  });

  it('limits endpoints per user, validates input and deletes', async () => {
    const dave = await signIn(stack.api);
    const bad = await dave.api.post('/webhooks', { url: hookUrl('dave'), events: ['instance.exploded'] });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('VALIDATION_FAILED');
    const ids: string[] = [];
    for (let i = 0; i < PER_USER; i++) ids.push((await createHook(dave, `dave-${i}`)).id);
    const over = await dave.api.post('/webhooks', { url: hookUrl('dave-over'), events: ['instance.status'] });
    expect(over.status).toBe(403);
    expect(over.body).toEqual({ error: expect.any(String), code: 'WEBHOOK_LIMIT_EXCEEDED', status: 403 });
    expect((await alice.api.del(`/webhooks/${ids[0]}`)).status).toBe(404);
    const del = await dave.api.del(`/webhooks/${ids[0]}`);
    expect(del.body).toEqual({ success: true, id: ids[0] });
    expect((await dave.api.get('/webhooks')).body.webhooks).toHaveLength(PER_USER - 1);
    expect((await dave.api.del(`/webhooks/${ids[0]}`)).body.code).toBe('WEBHOOK_NOT_FOUND');
    expect((await dave.api.del('/webhooks/not-an-id')).status).toBe(400);
  });
});
