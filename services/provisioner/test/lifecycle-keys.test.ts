import { beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { recordSecret, sealedKeys, type Stack, docker, newUser, waitFor, type Nats } from '@agenthost/testkit';
import { instanceSuite, waitRunning } from './helpers.ts';

// An instance's keys over its life: gone before its delete answers, fetched again by a container restarted after a
// crash. The rest of the lifecycle is in lifecycle.test.ts.
const P = contracts.provisioner;
const suite = instanceSuite('lifekeys', [19550, 19559]);
let stack: Stack;
let n: Nats;
beforeAll(() => {
  ({ stack, n } = suite);
});

const running = (user_id: string, instance_id: string) => waitRunning(n, user_id, instance_id);

describe("an instance's keys on the real Docker engine", () => {
  it('removes the keys before the delete answers: listing them right after never finds them, over 50 runs', async () => {
    const KV = contracts.keyvault;
    const user_id = newUser();
    const runs = Array.from({ length: 50 }, (_, i) => i);
    // Three at a time (within the tier's instance limit), each: create → store a key → delete → list.
    for (let i = 0; i < runs.length; i += 3) {
      await Promise.all(
        runs.slice(i, i + 3).map(async (run) => {
          const { instance_id } = await n.call(P.create, { user_id, tier: 'enterprise', framework: 'openclaw' });
          const value = `sk-run-${run}-${instance_id}`;
          recordSecret(value);
          await n.call(KV.store, { user_id, instance_id, sealed_keys: sealedKeys(instance_id, { RUN_KEY: value }) });
          expect((await n.call(KV.list, { user_id, instance_id })).keys.map((k) => k.key_name)).toEqual(['RUN_KEY']);
          await n.call(P.remove, { user_id, instance_id });
          const after = await n.fail(KV.list, { user_id, instance_id });
          expect(after, `run ${run}`).toMatchObject({ code: 'INSTANCE_NOT_FOUND', status: 404 });
        }),
      );
    }
    expect((await n.call(P.usage, { user_id })).instances_active).toBe(0);
  }, 300_000);

  it('hands fresh credentials to a container restarted after a crash; nothing in its configuration fetches keys', async () => {
    const user_id = newUser();
    const { instance_id, port } = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    await running(user_id, instance_id);
    const value = `sk-after-crash-${instance_id}`;
    recordSecret(value);
    await n.call(contracts.keyvault.store, { user_id, instance_id, sealed_keys: sealedKeys(instance_id, { CRASH_KEY: value }) });
    const cname = `agenthost-${instance_id}`;
    const before = JSON.parse(await docker('inspect', cname))[0];

    // No value in the container's configuration opens the keys endpoint.
    const keysUrl = (before.Config.Env as string[]).find((e) => e.startsWith('AGENTHOST_KEYS_URL='))!.slice('AGENTHOST_KEYS_URL='.length);
    const gateway = keysUrl.replace(/^http:\/\/[^/]+/, stack.baseUrl.replace(/\/api$/, ''));
    for (const candidate of [
      ...(before.Config.Env as string[]).map((e) => e.slice(e.indexOf('=') + 1)),
      ...Object.values(before.Config.Labels as Record<string, string>),
    ]) {
      const res = await fetch(gateway, { headers: { 'x-instance-id': instance_id, 'x-instance-secret': candidate } });
      expect(res.status, 'a configuration value opened the keys').not.toBe(200);
    }

    // The agent dies (SIGKILL from the host); the provisioner's self-healing starts it again.
    process.kill(before.State.Pid, 'SIGKILL');
    await waitFor('the container to be restarted', async () => ((await n.call(P.get, { user_id, instance_id })).restarts ?? 0) >= 1, 30_000, 200);
    const env = await waitFor(
      'the restarted agent to have fetched its keys',
      async () => {
        const res = await fetch(`http://127.0.0.1:${port}/env`).catch(() => undefined);
        if (res?.status !== 200) return undefined;
        const body = (await res.json()) as { names: string[] };
        return body.names.includes('CRASH_KEY') ? body : undefined;
      },
      60_000,
      250,
    );
    expect(env.names).not.toContain('AGENTHOST_INSTANCE_SECRET');
    await n.call(P.remove, { user_id, instance_id });
  }, 120_000);
});
