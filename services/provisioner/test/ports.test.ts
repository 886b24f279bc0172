import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { startStack, type Stack, cleanupDocker, docker, natsClient, newUser, provisionerEnv, testNetwork, type Nats } from '@agenthost/testkit';
import { fakeKeyvault } from './helpers.ts';

const P = contracts.provisioner;
const network = testNetwork('port');
const PORTS: [number, number] = [18200, 18201];

let stack: Stack;
let n: Nats;
let kv: Awaited<ReturnType<typeof fakeKeyvault>> | undefined;
let db: pg.Client;

beforeAll(async () => {
  await cleanupDocker(network);
  // keyvault is the test's own responder here, so that it can be taken away.
  stack = await startStack({
    services: ['provisioner'],
    serviceEnv: { provisioner: provisionerEnv({ network, ports: PORTS, extra: { INSTANCE_EXTRA_ENV_JSON: '{"AGENTHOST_BOOTSTRAP_SKIP_KEYS":"1"}' } }) },
  });
  n = await natsClient(stack.nats);
  kv = await fakeKeyvault(n.nc);
  db = new pg.Client({ connectionString: stack.db.url });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  await kv?.stop();
  await n?.close();
  await stack?.stop();
  await cleanupDocker(network);
});

const dockerObjects = async () => ({
  containers: (await docker('ps', '-aq', '--filter', `label=agenthost.scope=${network}`)).split('\n').filter(Boolean).length,
  volumes: (await docker('volume', 'ls', '-q', '--filter', `label=agenthost.scope=${network}`)).split('\n').filter(Boolean).length,
});
const leases = async () => (await db.query<{ port: number }>('select port from provisioner.instances order by port')).rows.map((r) => r.port);

describe('port leases', () => {
  it('runs out of a 2-port range with 409 PORTS_EXHAUSTED, leaking nothing, and reuses a freed port', async () => {
    const users = [newUser(), newUser(), newUser()];
    const results = await Promise.allSettled(
      users.flatMap((user_id) => [1, 2].map(() => n.call(P.create, { user_id, tier: 'enterprise', framework: 'openclaw' }, 60_000))),
    );
    const ok = results.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<{ instance_id: string; port: number }>).value);
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
    expect(ok.map((i) => i.port).sort()).toEqual([18200, 18201]);
    expect(refused).toHaveLength(4);
    for (const e of refused) expect(e).toMatchObject({ code: 'PORTS_EXHAUSTED', status: 409 });
    expect(await leases()).toEqual([18200, 18201]);
    expect(await dockerObjects()).toEqual({ containers: 2, volumes: 2 });

    const owner = (await db.query<{ user_id: string }>('select user_id from provisioner.instances where id = $1', [ok[0]!.instance_id])).rows[0]!.user_id;
    await n.call(P.remove, { user_id: owner, instance_id: ok[0]!.instance_id });
    const next = await n.call(P.create, { user_id: newUser(), tier: 'enterprise', framework: 'openclaw' });
    expect(next.port).toBe(ok[0]!.port);
    expect(await n.fail(P.create, { user_id: newUser(), tier: 'enterprise', framework: 'openclaw' })).toMatchObject({ code: 'PORTS_EXHAUSTED' });
    for (const r of (await db.query<{ id: string; user_id: string }>('select id, user_id from provisioner.instances')).rows) {
      await n.call(P.remove, { user_id: r.user_id, instance_id: r.id });
    }
    expect(await leases()).toEqual([]);
    expect(await dockerObjects()).toEqual({ containers: 0, volumes: 0 });
  });

  it('fails a create with 503 when keyvault is unavailable, and rolls everything back', async () => {
    await kv!.stop();
    kv = undefined;
    const e = await n.fail(P.create, { user_id: newUser(), tier: 'pro', framework: 'openclaw' });
    expect(e).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503 });
    expect(await leases()).toEqual([]);
    expect(await dockerObjects()).toEqual({ containers: 0, volumes: 0 });
    kv = await fakeKeyvault(n.nc);
    const ok = await n.call(P.create, { user_id: newUser(), tier: 'pro', framework: 'openclaw' });
    expect(ok.port).toBe(PORTS[0]);
  });
});
