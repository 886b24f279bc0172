import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { recordSecret, spawnService, startStack, type ServiceProcess, type Stack } from '@agenthost/testkit';
import { tokenOf } from './backup-helpers.ts';
import { cleanupDocker, docker, gatewayEnv, natsClient, newUser, provisionerEnv, testNetwork, waitFor, type Nats } from './helpers.ts';
import { agent, buildUpgradeImages, containerImage, hasEnv, imageId, readProof, removeUpgradeImages, settled, writeProof } from './upgrade-helpers.ts';

const P = contracts.provisioner;
const network = testNetwork('upgc');
const PREFIX = 't-upc';

let stack: Stack;
let n: Nats;
let db: pg.Client;
let v: Awaited<ReturnType<typeof buildUpgradeImages>>;
const procs: ServiceProcess[] = [];

const provisioner = async (faultAt = '') => {
  const p = await spawnService('provisioner', {
    env: { ...stack.envFor('provisioner'), ...provisionerEnv({ network, ports: [19370, 19389] }), FAULT_PAUSE_AT: faultAt },
    label: `provisioner-${faultAt || 'clean'}`,
  });
  procs.push(p);
  return p;
};

const pausedAt = (p: ServiceProcess, point: string) =>
  waitFor(`pause at ${point}`, async () => p.lines().some((l) => l.includes('"event":"fault_pause"') && l.includes(`"point":"${point}"`)), 60_000, 25);

const containers = async () => (await docker('ps', '-aq', '--filter', `label=agenthost.scope=${network}`)).split('\n').filter(Boolean);

beforeAll(async () => {
  await cleanupDocker(network);
  v = await buildUpgradeImages(PREFIX);
  stack = await startStack({ services: ['keyvault'], serviceEnv: { gateway: gatewayEnv } });
  n = await natsClient(stack.nats);
  db = new pg.Client({ connectionString: stack.db.url });
  await db.connect();
}, 300_000);

afterAll(async () => {
  for (const p of procs) await p.kill();
  await db?.end();
  await n?.close();
  await stack?.stop();
  await cleanupDocker(network);
  await removeUpgradeImages(PREFIX);
});

describe('a provisioner killed with SIGKILL in the middle of an upgrade', () => {
  // 'recreating': the row names the new image, the old container still runs. 'recreated': the old container is
  // gone and the new one is made but not started. Either way the next provisioner rolls the upgrade back.
  it.each(['recreating', 'recreated'])(
    'leaves the instance on its old image, running, with its data and token, when killed at "%s"',
    async (point) => {
      const user_id = newUser();
      const id1 = await imageId(v.one);
      const p = await provisioner(point);
      const c = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw', version: v.one });
      recordSecret(c.access_token!);
      await settled(n, user_id, c.instance_id);
      await writeProof(c.instance_id, `written before ${point}`);
      const pending = n.call(P.upgrade, { user_id, instance_id: c.instance_id, version: v.two }, 4000).catch((e) => e);
      await pausedAt(p, point);
      await p.kill();
      const row = (await db.query('select step, upgrade_state, version from provisioner.instances where id = $1', [c.instance_id])).rows[0];
      expect(row).toEqual({ step: 'recreating', upgrade_state: 'upgrading', version: v.two });

      // The next provisioner reconciles before it reports ready.
      const q = await provisioner();
      const back = await settled(n, user_id, c.instance_id, 'rolled_back');
      expect(back).toMatchObject({
        version: v.one,
        image_digest: id1,
        port: c.port,
        upgrade: { state: 'rolled_back', to_version: v.two, reason: 'The provisioner stopped during the upgrade' },
      });
      expect(await containers()).toHaveLength(1);
      expect(await containerImage(c.instance_id)).toBe(id1);
      expect(await readProof(c.instance_id)).toBe(`written before ${point}`);
      expect(await tokenOf(c.instance_id)).toBe(c.access_token);
      expect(hasEnv(await agent(c.port), 'STANDIN_MARK', `${PREFIX}-1`)).toBe(true);

      // And it can be upgraded normally afterwards.
      await n.call(P.upgrade, { user_id, instance_id: c.instance_id, version: v.two });
      expect(await settled(n, user_id, c.instance_id, 'upgraded')).toMatchObject({ version: v.two, image_digest: await imageId(v.two) });
      await n.call(P.remove, { user_id, instance_id: c.instance_id });
      expect(await containers()).toEqual([]);
      await q.stop();
      await pending;
    },
    240_000,
  );
});
