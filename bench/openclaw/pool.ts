// The openclaw bench's warm pool (run.ts step 8, docs/decisions/0063-...): the stack's provisioner replaced by one
// that keeps one checkpointed agent per tier (WARM_POOL_JSON), and creates that claim it, one at a time, each once the
// pool has refilled: create → running (its status event), against the same run's boots.
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { spawnService as SpawnService } from '../../packages/testkit/src/index.ts';
import { docker, sleep } from './container.ts';
import { createMany, removeAll, stats } from './creates.ts';

type Service = Awaited<ReturnType<typeof SpawnService>>;
type CreateOpts = Parameters<typeof createMany>[0];
const POOL_USER = '00000000-0000-0000-0000-000000000000';

/** Ids of the pool's agents asleep checkpointed: sealed image whole, hold-init alone in the container. */
async function pooledReady(scope: string, checkpointScope: string, tier: string): Promise<string[]> {
  const names = (await docker('ps', '--filter', `label=agenthost.scope=${scope}`, '--filter', `label=agenthost.user=${POOL_USER}`, '--format', '{{.Names}}'))
    .split('\n')
    .filter(Boolean);
  const ready: string[] = [];
  for (const name of names) {
    const id = name.replace(/^agenthost-/, '');
    if (!existsSync(path.join(checkpointScope, id))) continue;
    const memory = Number(await docker('inspect', '-f', '{{.HostConfig.Memory}}', name).catch(() => '0'));
    const top = await docker('top', name, '-o', 'pid,comm').catch(() => '');
    const comms = top
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/)[1]);
    if (comms.join() === 'hold-init' && memory === tierMemory.get(tier)) ready.push(id);
  }
  return ready;
}
const tierMemory = new Map<string, number>();

export async function warmPoolCreates(o: {
  /** Replaces the stack's provisioner by one with these settings more (checkpointing.ts). */
  replaceProvisioner(env: Record<string, string>): Promise<Service>;
  scope: string;
  checkpointScope: string;
  tiers: Record<string, { memory_mb: number }>;
  rounds: number;
  create: Omit<CreateOpts, 'tier'>;
  user_id: string;
  log: (msg: string) => void;
}): Promise<{ service: Service; rows: Record<string, ReturnType<typeof stats> & { boots_instead: number }>; failures: number }> {
  for (const [tier, l] of Object.entries(o.tiers)) tierMemory.set(tier, l.memory_mb * 2 ** 20);
  const service = await o.replaceProvisioner({ WARM_POOL_JSON: JSON.stringify({ openclaw: Object.fromEntries(Object.keys(o.tiers).map((t) => [t, 1])) }) });
  const rows: Record<string, ReturnType<typeof stats> & { boots_instead: number }> = {};
  let failures = 0;
  for (const tier of Object.keys(o.tiers)) {
    const ms: number[] = [];
    let bootsInstead = 0;
    for (let r = 0; r < o.rounds; r++) {
      // The pool refills one agent at a time: wait for this tier's (its boot and checkpoint).
      const deadline = Date.now() + 300_000;
      let ready: string[] = [];
      while (!(ready = await pooledReady(o.scope, o.checkpointScope, tier)).length && Date.now() < deadline) await sleep(500);
      if (!ready.length) {
        o.log(`warm pool (${tier}): no checkpointed agent after 300 s`);
        failures++;
        continue;
      }
      await sleep(2_000); // the host settles after the pool's boot and dump
      const c = await createMany({ ...o.create, tier }, o.user_id, 1);
      failures += c.failures;
      ms.push(...c.ms);
      if (c.ids[0] && !ready.includes(c.ids[0])) bootsInstead++;
      o.log(
        `warm pool (${tier}) round ${r + 1}/${o.rounds}: create → running ${Math.round(c.ms[0] ?? NaN)} ms${ready.includes(c.ids[0] ?? '') ? '' : ' (not from the pool)'}`,
      );
      await removeAll(o.create, o.user_id, c.ids);
    }
    rows[tier] = { ...stats(ms), boots_instead: bootsInstead };
  }
  return { service, rows, failures };
}
