import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import {
  eventHistory,
  recordSecret,
  startStack,
  type Stack,
  cleanupDocker,
  docker,
  gatewayEnv,
  natsClient,
  newUser,
  provisionerEnv,
  standinVariant,
  testNetwork,
  waitFor,
  type Nats,
  buildUpgradeImages,
  removeUpgradeImages,
} from '@agenthost/testkit';
import { tokenOf } from './backup-helpers.ts';
import { agent, containerImage, hasEnv, imageId, readProof, settled, writeProof } from './upgrade-helpers.ts';

const P = contracts.provisioner;
const network = testNetwork('upg');
const PREFIX = 't-up';
const REBUILT = `${PREFIX}-rebuilt`;

let stack: Stack;
let n: Nats;
let v: Awaited<ReturnType<typeof buildUpgradeImages>>;
const dangling: string[] = [];

beforeAll(async () => {
  await cleanupDocker(network);
  v = await buildUpgradeImages(PREFIX);
  stack = await startStack({
    services: ['keyvault', 'provisioner'],
    serviceEnv: { provisioner: provisionerEnv({ network, ports: [19350, 19369] }), gateway: gatewayEnv },
  });
  n = await natsClient(stack.nats);
}, 300_000);

afterAll(async () => {
  await n?.close();
  await stack?.stop();
  await cleanupDocker(network);
  await removeUpgradeImages(PREFIX, dangling);
});

async function newInstance(user_id: string, version: string) {
  const c = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw', version });
  recordSecret(c.access_token!);
  const s = await settled(n, user_id, c.instance_id);
  return { ...c, ...s, access_token: c.access_token! };
}

/** The instance's events.instance.status events that carry an upgrade's progress. */
const upgradeEvents = async (instance_id: string) =>
  (await eventHistory(n.nc, P.instanceStatusChanged.subject))
    .map((e) => e as { instance_id: string; status: string; upgrade?: string; upgrade_reason?: string })
    .filter((e) => e.instance_id === instance_id && e.upgrade)
    .map((e) => ({ status: e.status, upgrade: e.upgrade, ...(e.upgrade_reason ? { upgrade_reason: e.upgrade_reason } : {}) }));

describe('pinned images and upgrades (stand-in agent)', () => {
  it('an upgrade moves the instance to the new image: its data, port, URL and access token kept', async () => {
    const user_id = newUser();
    const [id1, id2] = [await imageId(v.one), await imageId(v.two)];
    const a = await newInstance(user_id, v.one);
    // Pinned at create: the status names the image ID, and the container was made from it.
    expect(a.image_digest).toBe(id1);
    expect(await containerImage(a.instance_id)).toBe(id1);
    await writeProof(a.instance_id, 'kept across the upgrade');
    const before = await agent(a.port);
    expect(hasEnv(before, 'STANDIN_MARK', `${PREFIX}-1`)).toBe(true);

    const u = await n.call(P.upgrade, { user_id, instance_id: a.instance_id, version: v.two });
    expect(u).toMatchObject({
      success: true,
      status: 'provisioning',
      version: v.two,
      image_digest: id2,
      upgrade: { state: 'upgrading', from_version: v.one, to_version: v.two, from_digest: id1 },
    });
    const after = await settled(n, user_id, a.instance_id, 'upgraded');
    expect(after).toMatchObject({
      version: v.two,
      image_digest: id2,
      port: a.port,
      url: a.url,
      upgrade: { state: 'upgraded', from_version: v.one, to_version: v.two, from_digest: id1 },
    });
    expect(after.upgrade?.reason).toBeUndefined();
    expect(await containerImage(a.instance_id)).toBe(id2);
    const now = await agent(a.port);
    expect(hasEnv(now, 'STANDIN_MARK', `${PREFIX}-2`)).toBe(true);
    // The same volume: the file written before and the agent's own state (one more boot).
    expect(await readProof(a.instance_id)).toBe('kept across the upgrade');
    expect({ born: now.born, boots: now.boots }).toEqual({ born: before.born, boots: before.boots + 1 });
    // The access token shown at create still opens the agent: the new container was given it.
    expect(await tokenOf(a.instance_id)).toBe(a.access_token);
    expect(hasEnv(now, 'OPENCLAW_GATEWAY_TOKEN', a.access_token)).toBe(true);
    await waitFor('upgrade events', async () => (await upgradeEvents(a.instance_id)).length >= 2, 15_000);
    expect(await upgradeEvents(a.instance_id)).toEqual([
      { status: 'provisioning', upgrade: 'upgrading' },
      { status: 'running', upgrade: 'upgraded' },
    ]);
    await n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 240_000);

  it('an upgrade to an image whose agent exits rolls itself back: the old image runs again and the reason is reported', async () => {
    const user_id = newUser();
    const id1 = await imageId(v.one);
    const a = await newInstance(user_id, v.one);
    await writeProof(a.instance_id, 'survives a rollback');
    const before = await agent(a.port);

    const u = await n.call(P.upgrade, { user_id, instance_id: a.instance_id, version: v.crash });
    expect(u).toMatchObject({ status: 'provisioning', upgrade: { state: 'upgrading', to_version: v.crash } });
    const back = await settled(n, user_id, a.instance_id, 'rolled_back');
    expect(back).toMatchObject({
      version: v.one,
      image_digest: id1,
      port: a.port,
      upgrade: { state: 'rolled_back', from_version: v.one, to_version: v.crash },
    });
    expect(back.upgrade?.reason).toMatch(/exited with code 3/);
    expect(await containerImage(a.instance_id)).toBe(id1);
    expect(await readProof(a.instance_id)).toBe('survives a rollback');
    const now = await agent(a.port);
    expect(now.born).toBe(before.born);
    expect(hasEnv(now, 'STANDIN_MARK', `${PREFIX}-1`)).toBe(true);
    expect(hasEnv(now, 'OPENCLAW_GATEWAY_TOKEN', a.access_token)).toBe(true);
    // The rollback is a lifecycle event on JetStream, with its reason.
    await waitFor('rollback event', async () => (await upgradeEvents(a.instance_id)).some((e) => e.upgrade === 'rolled_back'), 15_000);
    const events = await upgradeEvents(a.instance_id);
    expect(events.map((e) => e.upgrade)).toEqual(['upgrading', 'rolled_back']);
    expect(events[1]).toMatchObject({ status: 'provisioning', upgrade_reason: expect.stringMatching(/exited with code 3/) });
    await n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 240_000);

  it('an upgrade whose agent is never ready rolls back at its own timeout; meanwhile a stop is refused (409) and a delete goes through', async () => {
    const user_id = newUser();
    const id1 = await imageId(v.one);
    const a = await newInstance(user_id, v.one);
    await n.call(P.upgrade, { user_id, instance_id: a.instance_id, version: v.never, ready_timeout_seconds: 8 });
    // While it is upgrading, the owner's other verbs are refused (the upgrade settles by itself), not interleaved.
    const stop = await n.fail(P.stop, { user_id, instance_id: a.instance_id });
    expect(stop).toMatchObject({ code: 'INSTANCE_STATE_CONFLICT', status: 409 });
    expect(stop.message).toMatch(/upgrade of this instance is in progress/);
    expect(await n.fail(P.upgrade, { user_id, instance_id: a.instance_id, version: v.two })).toMatchObject({ code: 'INSTANCE_STATE_CONFLICT', status: 409 });
    const back = await settled(n, user_id, a.instance_id, 'rolled_back');
    expect(back).toMatchObject({ version: v.one, image_digest: id1 });
    expect(back.upgrade?.reason).toMatch(/did not become ready within 8 s/);
    expect(await containerImage(a.instance_id)).toBe(id1);

    // A delete in the middle of an upgrade is not refused: everything goes.
    await n.call(P.upgrade, { user_id, instance_id: a.instance_id, version: v.never, ready_timeout_seconds: 60 });
    await n.call(P.remove, { user_id, instance_id: a.instance_id });
    expect(await n.fail(P.get, { user_id, instance_id: a.instance_id })).toMatchObject({ code: 'INSTANCE_NOT_FOUND', status: 404 });
    expect((await docker('ps', '-aq', '--filter', `label=agenthost.instance=${a.instance_id}`)).trim()).toBe('');
  }, 240_000);

  it("update_available turns true once the version's tag is rebuilt; a restart keeps the pinned image, an upgrade takes the new one", async () => {
    const user_id = newUser();
    await standinVariant(REBUILT, { STANDIN_MARK: 'first-build' });
    const first = await imageId(REBUILT);
    dangling.push(first);
    const a = await newInstance(user_id, REBUILT);
    expect(a).toMatchObject({ image_digest: first, update_available: false });
    expect(a.update_version).toBeUndefined();

    await standinVariant(REBUILT, { STANDIN_MARK: 'second-build' });
    const second = await imageId(REBUILT);
    expect(second).not.toBe(first);
    const seen = await waitFor(
      'update_available',
      async () => {
        const s = await n.call(P.get, { user_id, instance_id: a.instance_id });
        return s.update_available ? s : undefined;
      },
      30_000,
      500,
    );
    expect(seen).toMatchObject({ image_digest: first, update_available: true, update_version: REBUILT });

    // A restart recreates the container from the pinned image, not from what the tag names now.
    await n.call(P.restart, { user_id, instance_id: a.instance_id, tier: 'pro' });
    await settled(n, user_id, a.instance_id);
    expect(await containerImage(a.instance_id)).toBe(first);
    expect(hasEnv(await agent(a.port), 'STANDIN_MARK', 'first-build')).toBe(true);

    // Upgrading to the same version takes the rebuilt image.
    await n.call(P.upgrade, { user_id, instance_id: a.instance_id, version: REBUILT });
    const up = await settled(n, user_id, a.instance_id, 'upgraded');
    expect(up).toMatchObject({ image_digest: second, update_available: false, upgrade: { from_version: REBUILT, to_version: REBUILT, from_digest: first } });
    expect(hasEnv(await agent(a.port), 'STANDIN_MARK', 'second-build')).toBe(true);
    // Nothing left to move to: the same version and image again is a conflict, not a silent restart.
    expect(await n.fail(P.upgrade, { user_id, instance_id: a.instance_id, version: REBUILT })).toMatchObject({ code: 'INSTANCE_STATE_CONFLICT', status: 409 });
    await n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 240_000);

  it('update_available names a newer version when one is tagged (versions that read as numbers)', async () => {
    const user_id = newUser();
    // Numbers no other suite tags: anything newer than 90210.1 here is this test's.
    const [older, newer] = ['90210.1', '90210.10'];
    for (const tag of [older, newer]) {
      await standinVariant(tag, { STANDIN_MARK: tag });
      dangling.push(`agenthost/standin:${tag}`);
    }
    const a = await newInstance(user_id, older);
    // 90210.10 is newer than 90210.1 (numbers compared part by part, not as text).
    const seen = await waitFor(
      'the newer version seen',
      async () => {
        const s = await n.call(P.get, { user_id, instance_id: a.instance_id });
        return s.update_version === newer ? s : undefined;
      },
      15_000,
      250,
    );
    expect(seen).toMatchObject({ version: older, update_available: true, update_version: newer });
    await n.call(P.upgrade, { user_id, instance_id: a.instance_id, version: newer });
    expect(await settled(n, user_id, a.instance_id, 'upgraded')).toMatchObject({ version: newer, update_available: false });
    await n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 180_000);

  it('refuses what cannot be upgraded, with clear 4xx answers', async () => {
    const user_id = newUser();
    const a = await newInstance(user_id, v.one);
    const bad = await n.fail(P.upgrade, { user_id, instance_id: a.instance_id, version: `${PREFIX}-no-such-build` });
    expect(bad).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    expect(bad.message).toMatch(/^version: no image agenthost\/standin:t-up-no-such-build/);
    expect(await n.fail(P.upgrade, { user_id, instance_id: a.instance_id, version: 'a:b' })).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    expect(await n.fail(P.upgrade, { user_id, instance_id: a.instance_id, version: v.two, ready_timeout_seconds: 1 })).toMatchObject({
      code: 'VALIDATION_FAILED',
      status: 400,
    });
    // Another user's instance does not exist for them.
    expect(await n.fail(P.upgrade, { user_id: newUser(), instance_id: a.instance_id, version: v.two })).toMatchObject({
      code: 'INSTANCE_NOT_FOUND',
      status: 404,
    });
    await n.call(P.stop, { user_id, instance_id: a.instance_id });
    const stopped = await n.fail(P.upgrade, { user_id, instance_id: a.instance_id, version: v.two });
    expect(stopped).toMatchObject({ code: 'INSTANCE_STATE_CONFLICT', status: 409 });
    expect(stopped.message).toMatch(/start it first/);
    expect((await n.call(P.get, { user_id, instance_id: a.instance_id })).version).toBe(v.one);
    await n.call(P.remove, { user_id, instance_id: a.instance_id });
  }, 180_000);
});
