import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Session } from '@agenthost/testkit';
import { instanceStack, receiverTls, startReceiver, type Received } from '@agenthost/testkit';

// Webhooks from the real system: a real instance's lifecycle (provisioner, Docker) and its key changes (keyvault,
// the gateway's key reload), delivered to an https receiver and verified with standardwebhooks.

const RECEIVER_PORT = 19320;
let sys: Awaited<ReturnType<typeof instanceStack>>;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let alice: Session;
let bob: Session;

beforeAll(async () => {
  const tls = receiverTls(['localhost']);
  receiver = await startReceiver(RECEIVER_PORT, tls);
  sys = await instanceStack('webhooks', [19310, 19319], {
    WEBHOOK_ALLOW_HOSTS: 'localhost',
    WEBHOOK_CA_FILE: tls.caFile,
    WEBHOOK_POLL_MS: '500',
    KEYS_APPLY_WAIT_MS: '1000',
  });
  alice = await sys.subscriber();
  bob = await sys.subscriber();
}, 240_000);

afterAll(async () => {
  await sys?.stop();
  await receiver?.close();
});

type Body = { type: string; timestamp: string; data: Record<string, unknown> };
const EVENTS = ['instance.created', 'instance.status', 'instance.deleted', 'keys.changed'];

describe('webhooks from real instances', () => {
  it("delivers an instance's lifecycle and its key changes (names only) to its owner alone", async () => {
    const a = (await alice.api.post('/webhooks', { url: `https://localhost:${RECEIVER_PORT}/alice`, events: EVENTS })).body as { id: string; secret: string };
    const b = (await bob.api.post('/webhooks', { url: `https://localhost:${RECEIVER_PORT}/bob`, events: EVENTS })).body as { id: string; secret: string };
    expect(a.secret).toMatch(/^whsec_/);
    const create = await alice.api.post('/instance/create', { framework: 'openclaw', name: 'hooked' });
    expect(create.status, create.text).toBe(200);
    const id = create.body.instance_id as string;
    expect((await alice.api.get(`/instance/wait/${id}?state=running&timeout=60`)).status).toBe(200);

    const SECRET_VALUE = `sk-webhook-${crypto.randomUUID()}`;
    const stored = await alice.api.post('/keys/store', { instance_id: id, keys: { OPENAI_API_KEY: SECRET_VALUE } });
    expect(stored.status, stored.text).toBe(200);
    expect((await alice.api.del(`/instance/delete/${id}`)).status).toBe(200);

    const verified = (r: Received) => new Webhook(a.secret).verify(r.body, r.headers) as Body;
    const mine = (all: Received[]) => all.filter((r) => r.path === '/alice').map(verified);
    const keys = await receiver.until((all) => mine(all).find((e) => e.type === 'keys.changed'));
    expect(keys.data).toMatchObject({ instance_id: id, action: 'stored', key_names: ['OPENAI_API_KEY'] });
    await receiver.until((all) => mine(all).find((e) => e.type === 'instance.deleted'));
    const got = mine(receiver.received);
    expect(got.find((e) => e.type === 'instance.created')?.data).toMatchObject({ instance_id: id });
    expect(got.filter((e) => e.type === 'instance.status').map((e) => e.data.status)).toContain('running');
    // The value never leaves keyvault: not in any delivered body, nor in the delivery log.
    expect(receiver.received.some((r) => r.body.includes(SECRET_VALUE))).toBe(false);
    expect((await alice.api.get(`/webhooks/${a.id}/deliveries?limit=100`)).text).not.toContain(SECRET_VALUE);
    // Bob's endpoint heard nothing of alice's instance.
    expect(receiver.received.filter((r) => r.path === '/bob' && r.body.includes(id))).toEqual([]);
    expect((await bob.api.get(`/webhooks/${b.id}/deliveries`)).body.deliveries).toEqual([]);
    console.log(
      `[webhooks] ${got.length} events for one instance: ${got.map((e) => (e.type === 'instance.status' ? `status:${String(e.data.status)}` : e.type)).join(', ')}`,
    );
  }, 180_000);
});
