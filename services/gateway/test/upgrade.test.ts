import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Session } from '@agenthost/testkit';
import { waitFor, buildUpgradeImages, removeUpgradeImages, instanceStack } from '@agenthost/testkit';

// POST /instance/upgrade/{id} through the gateway, against the real provisioner and Docker (stand-in agent image).

const PREFIX = 't-upg';
let sys: Awaited<ReturnType<typeof instanceStack>>;
let alice: Session;
let bob: Session;
let v: Awaited<ReturnType<typeof buildUpgradeImages>>;

beforeAll(async () => {
  v = await buildUpgradeImages(PREFIX);
  sys = await instanceStack('upg', [19390, 19399]);
  alice = await sys.subscriber();
  bob = await sys.subscriber();
}, 300_000);

afterAll(async () => {
  await sys?.stop();
  await removeUpgradeImages(PREFIX);
});

describe('POST /instance/upgrade/{id}', () => {
  it('upgrades once per Idempotency-Key, shows the pinned image and the outcome in the status, and refuses bad input with 4xx', async () => {
    const c = await alice.api.post('/instance/create', { framework: 'openclaw', version: v.one });
    expect(c.status).toBe(200);
    const id = c.body.instance_id as string;
    expect((await alice.api.get(`/instance/wait/${id}?state=running&timeout=60`)).status).toBe(200);
    const before = await alice.api.get(`/instance/status/${id}`);
    expect(before.body).toMatchObject({ version: v.one, image_digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/), update_available: false });

    const key = randomUUID();
    const up = await alice.api.post(`/instance/upgrade/${id}`, { version: v.two }, { 'idempotency-key': key });
    expect(up.status, JSON.stringify(up.body)).toBe(200);
    expect(up.body).toMatchObject({
      success: true,
      instance_id: id,
      status: 'provisioning',
      version: v.two,
      upgrade: { state: 'upgrading', from_version: v.one, to_version: v.two },
    });
    // A retry with the key gets the first answer again; it does not start a second upgrade.
    const again = await alice.api.post(`/instance/upgrade/${id}`, { version: v.two }, { 'idempotency-key': key });
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.body).toEqual(up.body);
    const after = await waitFor(
      'upgraded',
      async () => {
        const s = await alice.api.get(`/instance/status/${id}`);
        return s.body.status === 'running' && s.body.upgrade?.state === 'upgraded' ? s.body : undefined;
      },
      90_000,
      250,
    );
    expect(after).toMatchObject({ version: v.two, image_digest: up.body.image_digest, url: c.body.url });
    expect(after.image_digest).not.toBe(before.body.image_digest);

    for (const [body, code, status] of [
      [{}, 'VALIDATION_FAILED', 400],
      [{ version: '../etc' }, 'VALIDATION_FAILED', 400],
      [{ version: `${PREFIX}-missing` }, 'VALIDATION_FAILED', 400],
      [{ version: v.two }, 'INSTANCE_STATE_CONFLICT', 409],
    ] as const) {
      const r = await alice.api.post(`/instance/upgrade/${id}`, body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(r.body).toMatchObject({ code, status, error: expect.any(String) });
    }
    expect(await bob.api.post(`/instance/upgrade/${id}`, { version: v.one })).toMatchObject({ status: 404, body: { code: 'INSTANCE_NOT_FOUND' } });
    expect((await alice.api.del(`/instance/delete/${id}`)).status).toBe(200);
  }, 240_000);
});
