// The density run of the openclaw bench: `count` free instances of the real agent on this machine, created at once
// (the provisioner staggers their starts), left idle until every one sleeps lightly. The host's used memory
// (MemTotal - MemAvailable: page cache does not count, zram's compressed pages do) is read before, at its peak
// while they boot, and once all sleep: the figure per agent is what each costs the host asleep.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { contracts, request } from '../../packages/shared/src/index.ts';
import { sleep } from './container.ts';

type Nc = Parameters<typeof request>[0];
type Asserter = NonNullable<Parameters<typeof request>[3]>['asserter'];
const P = contracts.provisioner;

function hostUsedMb(): number {
  const t = readFileSync('/proc/meminfo', 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(t)?.[1] ?? 0);
  return (kb('MemTotal') - kb('MemAvailable')) / 1024;
}

export async function densityRun(o: { nc: Nc; asserter: Asserter; count: number; log: (m: string) => void }) {
  const user_id = randomUUID();
  const call = <C extends contracts.Contract>(c: C, input: contracts.In<C>) => request(o.nc, c, input, { timeoutMs: 120_000, asserter: o.asserter });
  const before = hostUsedMb();
  let peak = before;
  const ids: string[] = [];
  try {
    for (let i = 0; i < o.count; i++) ids.push((await call(P.create, { user_id, tier: 'free', framework: 'openclaw', name: `density-${i}` })).instance_id);
    const deadline = Date.now() + 900_000;
    let asleep = 0;
    let failed = 0;
    while (Date.now() < deadline) {
      peak = Math.max(peak, hostUsedMb());
      const views = await Promise.all(ids.map((instance_id) => call(P.get, { user_id, instance_id })));
      asleep = views.filter((v) => v.status === 'sleeping').length;
      failed = views.filter((v) => v.status === 'failed').length;
      if (asleep + failed === ids.length) break;
      await sleep(1000);
    }
    // Let the last one's pages settle in swap.
    await sleep(5000);
    const all = hostUsedMb();
    o.log(
      `density: ${asleep}/${ids.length} asleep (${failed} failed); host used ${Math.round(before)} MB before, ${Math.round(peak)} MB at peak, ${Math.round(all)} MB asleep`,
    );
    return {
      instances: ids.length,
      asleep,
      failed,
      host_used_mb: { before: Math.round(before), peak: Math.round(peak), all_asleep: Math.round(all) },
      host_mb_per_agent_asleep: Math.round((all - before) / Math.max(1, asleep)),
      host_mb_per_agent_at_peak: Math.round((peak - before) / ids.length),
    };
  } finally {
    await Promise.all(ids.map((instance_id) => call(P.remove, { user_id, instance_id }).catch(() => {})));
  }
}
