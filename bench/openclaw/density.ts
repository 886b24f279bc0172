// The density run of the openclaw bench: `count` free instances of the real agent on this machine, created at once
// (the provisioner staggers their starts), left idle until every one sleeps lightly. The host's used memory
// (MemTotal - MemAvailable: page cache does not count, zram's compressed pages do) is read before, at its peak
// while they boot, and once all sleep: the figure per agent is what each costs the host asleep. With `depth:
// 'checkpointed'` all must reach the checkpointed deep sleep (an agent whose dump failed sleeps stopped: counted
// apart), `stagger` bounds how many boot at once (the creates wait), and the sealed images' size on disk is reported.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { contracts, request } from '../../packages/shared/src/index.ts';
import { sleep } from './container.ts';
import { duMb } from './wake.ts';

type Nc = Parameters<typeof request>[0];
type Asserter = NonNullable<Parameters<typeof request>[3]>['asserter'];
const P = contracts.provisioner;

function hostUsedMb(): number {
  const t = readFileSync('/proc/meminfo', 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(t)?.[1] ?? 0);
  return (kb('MemTotal') - kb('MemAvailable')) / 1024;
}

export async function densityRun(o: {
  nc: Nc;
  asserter: Asserter;
  count: number;
  depth?: 'checkpointed';
  /** At most this many booting at once (0: all created at once). */
  stagger?: number;
  checkpointDir?: string;
  /** The provisioner's log lines: a checkpointed sleep is done (image sealed) at its "put to sleep" line. */
  lines?: () => string[];
  log: (m: string) => void;
}) {
  const user_id = randomUUID();
  const call = <C extends contracts.Contract>(c: C, input: contracts.In<C>) => request(o.nc, c, input, { timeoutMs: 120_000, asserter: o.asserter });
  const before = hostUsedMb();
  let peak = before;
  const ids: string[] = [];
  try {
    const views = () => Promise.all(ids.map((instance_id) => call(P.get, { user_id, instance_id })));
    const t0 = Date.now();
    for (let i = 0; i < o.count; i++) {
      while (o.stagger && (await views()).filter((v) => !['running', 'sleeping', 'failed', 'stopped'].includes(v.status)).length >= o.stagger) {
        peak = Math.max(peak, hostUsedMb());
        await sleep(1000);
      }
      ids.push((await call(P.create, { user_id, tier: 'free', framework: 'openclaw', name: `density-${i}` })).instance_id);
    }
    o.log(`density: ${ids.length} created in ${Math.round((Date.now() - t0) / 1000)} s`);
    const deadline = Date.now() + 900_000;
    let asleep = 0;
    let failed = 0;
    let stopped = 0;
    while (Date.now() < deadline) {
      peak = Math.max(peak, hostUsedMb());
      const vs = await views();
      asleep = vs.filter((v) => v.status === 'sleeping' && (!o.depth || v.sleep_depth === o.depth)).length;
      stopped = o.depth ? vs.filter((v) => v.status === 'sleeping' && v.sleep_depth === 'stopped').length : 0;
      failed = vs.filter((v) => v.status === 'failed').length;
      if (asleep + failed + stopped === ids.length) break;
      await sleep(1000);
    }
    // `checkpointed` shows as the dump begins: wait for each one's sleep to end (its deep "put to sleep" line).
    if (o.depth && o.lines) {
      const done = () => {
        const ls = o.lines!().filter((l) => l.includes('idle instance put to sleep') && l.includes('"depth":"deep"'));
        return ids.every((id) => ls.some((l) => l.includes(id)));
      };
      const until = Date.now() + 120_000;
      while (!done() && Date.now() < until) await sleep(500);
    }
    const allAsleepS = Math.round((Date.now() - t0) / 1000);
    // Let the last one's pages settle in swap.
    await sleep(5000);
    const all = hostUsedMb();
    const imageMb = o.checkpointDir ? ids.reduce((sum, id) => sum + duMb(`${o.checkpointDir}/${id}`), 0) : undefined;
    o.log(
      `density: ${asleep}/${ids.length} asleep${o.depth ? ` ${o.depth}` : ''} after ${allAsleepS} s (${failed} failed, ${stopped} stopped instead); images ${imageMb ?? '-'} MB; host used ${Math.round(before)} MB before, ${Math.round(peak)} MB at peak, ${Math.round(all)} MB asleep`,
    );
    return {
      instances: ids.length,
      ...(o.depth ? { depth: o.depth, stagger: o.stagger ?? 0 } : {}),
      asleep,
      failed,
      ...(o.depth ? { stopped_instead: stopped } : {}),
      seconds_to_all_asleep: allAsleepS,
      ...(imageMb !== undefined ? { images_on_disk_mb: imageMb } : {}),
      host_used_mb: { before: Math.round(before), peak: Math.round(peak), all_asleep: Math.round(all) },
      host_mb_per_agent_asleep: Math.round((all - before) / Math.max(1, asleep)),
      host_mb_per_agent_at_peak: Math.round((peak - before) / ids.length),
    };
  } finally {
    await Promise.all(ids.map((instance_id) => call(P.remove, { user_id, instance_id }).catch(() => {})));
  }
}
