import { beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { docker, newUser, waitFor, type Nats } from '@agenthost/testkit';
import { instanceSuite } from './helpers.ts';

const P = contracts.provisioner;
const suite = instanceSuite('lim', [18150, 18179]);
const { network } = suite;

let n: Nats;
beforeAll(() => {
  ({ n } = suite);
});

const containersOf = async (user_id: string) =>
  (await docker('ps', '-aq', '--filter', `label=agenthost.user=${user_id}`, '--filter', `label=agenthost.scope=${network}`)).split('\n').filter(Boolean);

async function race(user_id: string, tier: 'free' | 'pro' | 'enterprise', count: number) {
  const results = await Promise.allSettled(Array.from({ length: count }, () => n.call(P.create, { user_id, tier, framework: 'openclaw' }, 60_000)));
  const ok = results.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<{ instance_id: string; port: number }>).value);
  const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as { code: string; status: number });
  return { ok, refused };
}

describe('instance limit of the tier under concurrent creates', () => {
  it.each([
    ['free', 1],
    ['pro', 5],
  ] as const)('6 parallel creates on %s (limit %i) never exceed the limit', async (tier, limit) => {
    const user_id = newUser();
    const { ok, refused } = await race(user_id, tier, 6);
    expect(ok).toHaveLength(limit);
    expect(refused).toHaveLength(6 - limit);
    for (const e of refused) expect(e).toMatchObject({ code: 'INSTANCE_LIMIT_EXCEEDED', status: 403 });
    expect(new Set(ok.map((i) => i.port)).size).toBe(limit);
    expect(await containersOf(user_id)).toHaveLength(limit);
    expect((await n.call(P.usage, { user_id })).instances_active).toBe(limit);
    // One more, sequentially, is refused too; after a delete there is room for exactly one.
    expect(await n.fail(P.create, { user_id, tier, framework: 'openclaw' })).toMatchObject({ code: 'INSTANCE_LIMIT_EXCEEDED' });
    await n.call(P.remove, { user_id, instance_id: ok[0]!.instance_id });
    const again = await race(user_id, tier, 3);
    expect(again.ok).toHaveLength(1);
    for (const i of [...ok.slice(1), ...again.ok]) await n.call(P.remove, { user_id, instance_id: i.instance_id });
    expect(await containersOf(user_id)).toHaveLength(0);
  });

  it('lets enterprise (unlimited) create in parallel with distinct ports', async () => {
    const user_id = newUser();
    const { ok, refused } = await race(user_id, 'enterprise', 6);
    expect(refused).toEqual([]);
    expect(new Set(ok.map((i) => i.port)).size).toBe(6);
    for (const i of ok) await n.call(P.remove, { user_id, instance_id: i.instance_id });
  });
});

describe('storage limit of the tier', () => {
  it("refuses a new instance once the user's volumes hold the tier's storage, and allows it again after a delete", async () => {
    const user_id = newUser();
    const first = await n.call(P.create, { user_id, tier: 'free', framework: 'openclaw' }, 60_000);
    // The free tier allows 100 MB: the agent writes 101 MB into its volume, which stops it at its cap.
    const write = await docker('exec', `agenthost-${first.instance_id}`, 'dd', 'if=/dev/zero', 'of=/data/blob', 'bs=1M', 'count=101', 'status=none').then(
      () => 'written',
      (err: Error) => err.message,
    );
    expect(write).toMatch(/No space left on device/);
    await waitFor('storage sampled', async () => (await n.call(P.usage, { user_id })).storage_used_mb >= 100, 30_000, 500);
    const refused = await n.fail(P.create, { user_id, tier: 'free', framework: 'openclaw' });
    expect(refused).toMatchObject({ code: 'STORAGE_LIMIT_EXCEEDED', status: 403 });
    expect(refused.message).toMatch(/100 MB/);
    await n.call(P.remove, { user_id, instance_id: first.instance_id });
    const second = await n.call(P.create, { user_id, tier: 'free', framework: 'openclaw' }, 60_000);
    await n.call(P.remove, { user_id, instance_id: second.instance_id });
  });
});
