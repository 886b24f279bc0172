import { generateKeyPairSync } from 'node:crypto';
import { headers as natsHeaders, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASSERTION_HEADER, AssertionSigner, contracts, decode, encode } from '@agenthost/shared';
import { busKeys, type Stack, newUser, type Nats } from '@agenthost/testkit';
import { instanceSuite } from './helpers.ts';

// The review listed, stopped and deleted a victim's instances by naming its user_id on the bus. Repeated here
// with the gateway's own NATS identity (the one allowed to publish to the provisioner): nothing is believed
// without the gateway's assertion for that user, that subject and that body.

const P = contracts.provisioner;
const suite = instanceSuite('bustrust', [18620, 18624]);
let stack: Stack;
let n: Nats;
let asGateway: NatsConnection;

beforeAll(async () => {
  ({ stack, n } = suite);
  asGateway = await stack.nats.connect('gateway');
});
afterAll(async () => {
  await asGateway?.drain();
});

async function raw(subject: string, body: unknown, assertion?: string): Promise<{ ok: boolean; error?: { code: string; message: string } }> {
  const h = natsHeaders();
  if (assertion) h.set(ASSERTION_HEADER, assertion);
  return decode((await asGateway.request(subject, encode(body), { timeout: 10_000, headers: h })).data) as never;
}

describe('the provisioner believes no user_id on its own', () => {
  it('refuses to list, stop, delete or create for a victim without the gateway’s assertion, and the instance stays', async () => {
    const victim = newUser();
    const mallory = newUser();
    const { instance_id } = await n.call(P.create, { user_id: victim, tier: 'pro', framework: 'openclaw' });
    const attacker = new AssertionSigner(generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
    const gateway = new AssertionSigner(busKeys().assertionPem);

    expect(await raw(P.list.subject, { user_id: victim })).toMatchObject({ ok: false, error: { code: 'ASSERTION_INVALID' } });
    const stop = { user_id: victim, instance_id };
    expect(await raw(P.stop.subject, stop, attacker.sign(victim, P.stop.subject, encode(stop)))).toMatchObject({
      ok: false,
      error: { code: 'ASSERTION_INVALID' },
    });
    // A real assertion for mallory's own request, sent with the victim's id in the body.
    const own = { user_id: mallory, instance_id };
    expect(await raw(P.remove.subject, stop, gateway.sign(mallory, P.remove.subject, encode(own)))).toMatchObject({
      ok: false,
      error: { code: 'ASSERTION_MISMATCH' },
    });
    const create = { user_id: victim, tier: 'enterprise', framework: 'openclaw', subscription_cancelled: false };
    expect(await raw(P.create.subject, create)).toMatchObject({ ok: false, error: { code: 'ASSERTION_INVALID' } });

    const listed = await n.call(P.list, { user_id: victim });
    expect(listed.instances.map((i) => i.instance_id)).toEqual([instance_id]);
    expect(listed.instances[0]!.status).not.toBe('stopped');
    await n.call(P.remove, { user_id: victim, instance_id });
  }, 120_000);
});
