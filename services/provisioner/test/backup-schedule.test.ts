import { describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { recordSecret, newUser, provisionerEnv, waitFor } from '@agenthost/testkit';
import { backupSuite } from './backup-helpers.ts';

const P = contracts.provisioner;
const SCHEDULE_SECONDS = 2;
const small = { memory_mb: 256, cpus: 0.5, pids: 64 };
const s = backupSuite(
  'bksched',
  (network) => ({
    ...provisionerEnv({
      network,
      ports: [18880, 18884],
      tiers: { free: { ...small, backups_kept: 0 }, pro: { ...small, backups_kept: 2 }, enterprise: small },
    }),
    BACKUP_SCHEDULE_SECONDS: String(SCHEDULE_SECONDS),
  }),
  // A second replica: the schedule's database lock lets one of them take each instance's backup.
  async ({ stack }) => void (await stack.addReplica('provisioner', 'b')),
);

describe('scheduled backups', () => {
  it('each instance of a tier that keeps backups gets them on schedule, by one replica, within its retention', async () => {
    const user_id = newUser();
    const a = await s.n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    recordSecret(a.access_token!);
    const seen = new Set<string>();
    await waitFor(
      'three scheduled backups',
      async () => {
        const { backups } = await s.n
          .call(P.backups, { user_id, instance_id: a.instance_id })
          .catch(() => ({ backups: [] as contracts.provisioner.BackupView[] }));
        // The tier keeps two: never more, whatever the schedule has taken.
        expect(backups.length).toBeLessThanOrEqual(2);
        for (const b of backups) {
          expect(b.kind).toBe('scheduled');
          seen.add(b.backup_id);
        }
        // Two replicas, one schedule: consecutive backups are a whole interval apart, never twins of one pass.
        if (backups.length === 2)
          expect(Date.parse(backups[0]!.created_at) - Date.parse(backups[1]!.created_at)).toBeGreaterThanOrEqual(SCHEDULE_SECONDS * 1000);
        return seen.size >= 3;
      },
      90_000,
      200,
    );

    // A tier that keeps none gets none, and its manual backups are refused.
    const other = newUser();
    const f = await s.n.call(P.create, { user_id: other, tier: 'free', framework: 'openclaw' });
    recordSecret(f.access_token!);
    expect(await s.n.fail(P.backup, { user_id: other, instance_id: f.instance_id, tier: 'free' })).toMatchObject({ code: 'STORAGE_LIMIT_EXCEEDED' });
    // (After a few more of the pro instance's backups, the free one still has none.)
    const more = new Set(seen);
    await waitFor(
      'two more scheduled backups',
      async () => {
        for (const b of (await s.n.call(P.backups, { user_id, instance_id: a.instance_id })).backups) more.add(b.backup_id);
        return more.size >= seen.size + 2;
      },
      60_000,
      200,
    );
    expect((await s.n.call(P.backups, { user_id: other, instance_id: f.instance_id })).backups).toEqual([]);
    await s.n.call(P.remove, { user_id, instance_id: a.instance_id });
    await s.n.call(P.remove, { user_id: other, instance_id: f.instance_id });
  }, 240_000);
});
