import { describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { recordSecret, docker, newUser, buildUpgradeImages, removeUpgradeImages } from '@agenthost/testkit';
import { tokenOf } from './backup-helpers.ts';
import { crashSuite, pausedAt } from './crash-suite.ts';
import { agent, containerImage, hasEnv, imageId, readProof, settled, writeProof } from './upgrade-helpers.ts';

const P = contracts.provisioner;
const PREFIX = 't-upc';

let v: Awaited<ReturnType<typeof buildUpgradeImages>>;
const s = crashSuite('upgc', [19370, 19389], {
  before: async () => {
    v = await buildUpgradeImages(PREFIX);
  },
  after: () => removeUpgradeImages(PREFIX),
});
const { network, provisioner } = s;

const containers = async () => (await docker('ps', '-aq', '--filter', `label=agenthost.scope=${network}`)).split('\n').filter(Boolean);

describe('a provisioner killed with SIGKILL in the middle of an upgrade', () => {
  // 'recreating': the row names the new image, the old container still runs. 'recreated': the old container is
  // gone and the new one is made but not started. Either way the next provisioner rolls the upgrade back.
  it.each(['recreating', 'recreated'])(
    'leaves the instance on its old image, running, with its data and token, when killed at "%s"',
    async (point) => {
      const user_id = newUser();
      const id1 = await imageId(v.one);
      const p = await provisioner(point);
      const c = await s.n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw', version: v.one });
      recordSecret(c.access_token!);
      await settled(s.n, user_id, c.instance_id);
      await writeProof(c.instance_id, `written before ${point}`);
      const pending = s.n.call(P.upgrade, { user_id, instance_id: c.instance_id, version: v.two }, 4000).catch((e) => e);
      await pausedAt(p, point);
      await p.kill();
      const row = (await s.db.query('select step, upgrade_state, version from provisioner.instances where id = $1', [c.instance_id])).rows[0];
      expect(row).toEqual({ step: 'recreating', upgrade_state: 'upgrading', version: v.two });

      // The next provisioner reconciles before it reports ready.
      const q = await provisioner();
      const back = await settled(s.n, user_id, c.instance_id, 'rolled_back');
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
      await s.n.call(P.upgrade, { user_id, instance_id: c.instance_id, version: v.two });
      expect(await settled(s.n, user_id, c.instance_id, 'upgraded')).toMatchObject({ version: v.two, image_digest: await imageId(v.two) });
      await s.n.call(P.remove, { user_id, instance_id: c.instance_id });
      expect(await containers()).toEqual([]);
      await q.stop();
      await pending;
    },
    240_000,
  );
});
