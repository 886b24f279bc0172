import { generateKeyPairSync } from 'node:crypto';
import { headers as natsHeaders, type Msg, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openKey } from '@agenthost/instance-bootstrap/crypto';
import { ASSERTION_HEADER, AssertionSigner, decode, encode, request } from '@agenthost/shared';
import { busKeys, sealedKeys, signIn, startStack, type Session, type Stack, activeSubscriptions } from '@agenthost/testkit';
import { issue, kv, nextIp, retrieve, secretValue, waitFor } from './helpers.ts';

// The review's attacks on keyvault over the bus, repeated against a running stack: a process holding the
// gateway's own NATS identity names a victim's user_id, replays what it saw, or listens to `>`.

let stack: Stack;
let operator: NatsConnection;
let asGateway: NatsConnection;
let billing: { stop(): Promise<void> };
let alice: Session;
let mallory: Session;
/** Every message on the bus while the suite runs (subject, headers, body text). */
const seen: Array<{ subject: string; assertion: string | undefined; data: Uint8Array }> = [];

beforeAll(async () => {
  stack = await startStack({ services: ['auth', 'keyvault'], serviceEnv: { gateway: { TRUSTED_PROXIES: '127.0.0.1,::1' } } });
  operator = await stack.nats.connect();
  operator.subscribe('>', {
    callback: (_e, m: Msg) => void seen.push({ subject: m.subject, assertion: m.headers?.get(ASSERTION_HEADER) || undefined, data: m.data }),
  });
  asGateway = await stack.nats.connect('gateway');
  billing = await activeSubscriptions(stack.nats);
  alice = await signIn(stack.api);
  mallory = await signIn(stack.api);
});
afterAll(async () => {
  await billing?.stop();
  await asGateway?.drain();
  await operator?.drain();
  await stack?.stop();
});

/** A raw request as the gateway's NATS identity: the AppError body of the reply, or the result. */
async function raw(subject: string, body: unknown, assertion?: string): Promise<{ ok: boolean; error?: { code: string; message: string }; result?: unknown }> {
  const h = natsHeaders();
  if (assertion) h.set(ASSERTION_HEADER, assertion);
  const reply = await asGateway.request(subject, encode(body), { timeout: 5000, headers: h });
  return decode(reply.data) as never;
}

describe('keyvault believes no user_id on its own', () => {
  it('refuses a victim’s user_id with no assertion, or with one signed by another key, and changes nothing', async () => {
    const inst = await issue(operator, alice.user_id);
    const original = secretValue('sk-alice');
    expect((await alice.api.post('/keys/store', { instance_id: inst.instance_id, keys: { OPENAI_API_KEY: original } })).status).toBe(200);

    const forged = { user_id: alice.user_id, instance_id: inst.instance_id, meta: {} };
    expect(await raw(kv.list.subject, forged)).toMatchObject({ ok: false, error: { code: 'ASSERTION_INVALID' } });
    const attacker = new AssertionSigner(generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
    const store = { ...forged, sealed_keys: sealedKeys(inst.instance_id, { OPENAI_API_KEY: 'sk-attacker-chosen' }) };
    expect(await raw(kv.store.subject, store, attacker.sign(alice.user_id, kv.store.subject, encode(store)))).toMatchObject({
      ok: false,
      error: { code: 'ASSERTION_INVALID' },
    });

    // Mallory's own valid request, with alice's user id put in: the body no longer matches its assertion.
    const mine = { user_id: mallory.user_id, instance_id: inst.instance_id, meta: {} };
    const token = new AssertionSigner(busKeys().assertionPem).sign(mallory.user_id, kv.list.subject, encode(mine));
    expect(await raw(kv.list.subject, forged, token)).toMatchObject({ ok: false, error: { code: 'ASSERTION_MISMATCH' } });

    const got = await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp());
    expect(openKey({ instanceKey: inst.instance_key, instanceId: inst.instance_id, keyName: 'OPENAI_API_KEY', sealed: got.body.keys.OPENAI_API_KEY })).toBe(
      original,
    );
  });

  it('refuses an expired assertion, and a real one replayed to another subject or a second time', async () => {
    const inst = await issue(operator, alice.user_id);
    const from = seen.length;
    expect((await alice.api.del('/keys/delete', { instance_id: inst.instance_id, key_names: ['NONE_YET'] })).status).toBe(200);
    const captured = await waitFor('the delete request on the bus', async () => seen.slice(from).find((m) => m.subject === kv.remove.subject));
    expect(captured.assertion).toMatch(/^v1\./);
    const body = decode(captured.data);

    expect(await raw(kv.list.subject, body, captured.assertion)).toMatchObject({
      ok: false,
      error: { code: 'ASSERTION_MISMATCH', message: expect.stringMatching(/issued for keyvault.v1.keys.delete/) },
    });
    expect(await raw(kv.remove.subject, body, captured.assertion)).toMatchObject({
      ok: false,
      error: { code: 'ASSERTION_INVALID', message: expect.stringMatching(/replay/) },
    });

    const late = new AssertionSigner(busKeys().assertionPem, { now: () => Date.now() - 120_000 });
    const fresh = { user_id: alice.user_id, instance_id: inst.instance_id, meta: {} };
    expect(await raw(kv.list.subject, fresh, late.sign(alice.user_id, kv.list.subject, encode(fresh)))).toMatchObject({
      ok: false,
      error: { code: 'ASSERTION_INVALID', message: expect.stringMatching(/expired/) },
    });
  });

  it('lets only the provisioner issue credentials: the gateway’s identity is refused by NATS itself', async () => {
    await expect(request(asGateway, kv.issueCredentials, { user_id: alice.user_id, instance_id: 'kv-stolen' }, { timeoutMs: 2000 })).rejects.toMatchObject({
      code: 'SERVICE_UNAVAILABLE',
    });
  });
});

describe('no provider key rides the bus in plaintext', () => {
  it('a subscriber to `>` during /keys/store and /keys/update sees no key value, and the instance still opens them', async () => {
    const inst = await issue(operator, alice.user_id);
    const stored = secretValue('sk-store');
    const updated = secretValue('sk-update');
    const from = seen.length;
    expect(
      (await alice.api.post('/keys/store', { instance_id: inst.instance_id, keys: { OPENAI_API_KEY: stored, OTHER_KEY: secretValue('sk-other') } })).status,
    ).toBe(200);
    expect((await alice.api.put('/keys/update', { instance_id: inst.instance_id, key_name: 'OPENAI_API_KEY', key_value: updated })).status).toBe(200);
    await waitFor('both requests on the bus', async () => seen.slice(from).some((m) => m.subject === kv.update.subject));

    const traffic = seen.slice(from);
    expect(traffic.map((m) => m.subject)).toEqual(expect.arrayContaining([kv.store.subject, kv.update.subject]));
    const text = traffic.map((m) => Buffer.from(m.data).toString('utf8')).join('\n');
    expect(text).not.toContain(stored);
    expect(text).not.toContain(updated);
    expect(text).not.toContain(Buffer.from(stored).toString('base64'));

    const got = await retrieve(stack, inst.instance_id, inst.instance_secret, nextIp());
    expect(openKey({ instanceKey: inst.instance_key, instanceId: inst.instance_id, keyName: 'OPENAI_API_KEY', sealed: got.body.keys.OPENAI_API_KEY })).toBe(
      updated,
    );
  });

  it('refuses a sealed value moved to another instance with a 400', async () => {
    const a = await issue(operator, alice.user_id);
    const b = await issue(operator, alice.user_id);
    const body = {
      user_id: alice.user_id,
      instance_id: b.instance_id,
      sealed_keys: sealedKeys(a.instance_id, { OPENAI_API_KEY: secretValue('sk-moved') }),
      meta: {},
    };
    const res = await request(operator, kv.store, body, { asserter: new AssertionSigner(busKeys().assertionPem) }).catch((e) => e);
    expect(res).toMatchObject({ code: 'VALIDATION_FAILED', status: 400, message: expect.stringMatching(/^sealed_keys: cannot be opened/) });
  });
});
