// The sleep measurements of the openclaw bench: a real OpenClaw instance put to sleep by the provisioner, then one
// HTTPS request with its owner's token to its URL through the edge; the time from sending it to the agent's answer
// (the edge holds the request while the instance wakes). Per depth (docs/decisions/0052-two-sleep-depths.md):
//   light: frozen, and its memory pushed out to swap where the host's swap is safe for it (zram here);
//   deep: its container stopped, or, where the provisioner checkpoints (docs/decisions/0049-...), its agent's processes
//   dumped by CRIU to an image sealed on disk while the container runs on with hold-init alone (`checkpointed`).
// Each row also says how long the provisioner took to put it to sleep (its log) and what it held asleep: the frozen
// container's resident memory plus its pages in swap at zram's compression ratio (compressed pages are host memory).
// A checkpointed row holds the container's whole memory cgroup usage instead (hold-init, kernel memory and the page
// cache charged to it), and says apart what the sealed image takes on disk (image_mb) and whether each wake restored
// the agent or, the restore having failed, booted it.
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { contracts, request } from '../../packages/shared/src/index.ts';
import type { Edge } from '../../packages/testkit/src/index.ts';
import { docker, sleep } from './container.ts';

type Nc = Parameters<typeof request>[0];
type Asserter = NonNullable<Parameters<typeof request>[3]>['asserter'];

const P = contracts.provisioner;

/** zram's host memory per byte it holds (compressed pages and overhead over their original size); 0 without zram. */
export function zramRatio(): number {
  try {
    const [orig, , used] = readFileSync('/sys/block/zram0/mm_stat', 'utf8').trim().split(/\s+/).map(Number);
    return orig ? used! / orig : 0;
  } catch {
    return 0;
  }
}

/** The container's memory in swap now (MB), from its memory cgroup (v1 memory.stat, or v2 memory.swap.current). */
export async function swapMb(container: string): Promise<number> {
  const id = await docker('inspect', '-f', '{{.Id}}', container).catch(() => '');
  for (const [file, parse] of [
    [`/sys/fs/cgroup/memory/docker/${id}/memory.stat`, (t: string) => Number(/^swap (\d+)$/m.exec(t)?.[1] ?? 0)],
    [`/sys/fs/cgroup/system.slice/docker-${id}.scope/memory.swap.current`, (t: string) => Number(t.trim())],
  ] as const) {
    try {
      return parse(readFileSync(file, 'utf8')) / 2 ** 20;
    } catch {
      /* the other cgroup layout */
    }
  }
  return 0;
}

/** The container's memory charged to its cgroup now (MB), as `docker stats` reads it; 0 when it is stopped. */
export async function cgroupMb(container: string): Promise<number> {
  const usage = await docker('stats', '--no-stream', '--format', '{{.MemUsage}}', container).catch(() => '0MiB');
  const m = /([\d.]+)\s*([KMG]i?B)/.exec(usage);
  if (!m) return 0;
  const n = Number(m[1]);
  return m[2]!.startsWith('G') ? n * 1024 : m[2]!.startsWith('K') ? n / 1024 : n;
}

/** The container's memory cgroup as the kernel counts it (MB): usage (all of it) and its parts (cgroup v1 or v2). */
export async function cgroupRawMb(container: string): Promise<{ usage: number; anon: number; file: number; kernel: number } | undefined> {
  const id = await docker('inspect', '-f', '{{.Id}}', container).catch(() => '');
  const mb = (b: number) => Math.round((b / 2 ** 20) * 10) / 10;
  const stat = (t: string, k: string) => Number(new RegExp(`^${k} (\\d+)$`, 'm').exec(t)?.[1] ?? 0);
  try {
    const d = `/sys/fs/cgroup/memory/docker/${id}`;
    const t = readFileSync(`${d}/memory.stat`, 'utf8');
    const kmem = Number(readFileSync(`${d}/memory.kmem.usage_in_bytes`, 'utf8').trim());
    return {
      usage: mb(Number(readFileSync(`${d}/memory.usage_in_bytes`, 'utf8').trim())),
      anon: mb(stat(t, 'rss')),
      file: mb(stat(t, 'cache')),
      kernel: mb(kmem),
    };
  } catch {
    /* cgroup v2 */
  }
  try {
    const d = `/sys/fs/cgroup/system.slice/docker-${id}.scope`;
    const t = readFileSync(`${d}/memory.stat`, 'utf8');
    return {
      usage: mb(Number(readFileSync(`${d}/memory.current`, 'utf8').trim())),
      anon: mb(stat(t, 'anon')),
      file: mb(stat(t, 'file')),
      kernel: mb(stat(t, 'kernel')),
    };
  } catch {
    return undefined;
  }
}

/** A directory's size on disk (MB), 0 when it is not there. */
export function duMb(dir: string): number {
  try {
    return Number(execFileSync('du', ['-sm', dir], { encoding: 'utf8' }).split('\t')[0]);
  } catch {
    return 0;
  }
}

export interface DepthOpts {
  nc: Nc;
  edge: Edge;
  asserter: Asserter;
  rounds: number;
  tier: contracts.TierName;
  depth: 'frozen' | 'swapped' | 'stopped' | 'checkpointed';
  /** For `checkpointed`: the provisioner's image directory of this scope (<CHECKPOINT_DIR>/<scope>). */
  checkpointDir?: string;
  /** The provisioner's log lines so far (its "idle instance put to sleep" lines carry took_ms). */
  lines: () => string[];
  log: (m: string) => void;
}

export async function wakeAtDepth(o: DepthOpts) {
  const user_id = randomUUID();
  const call = <C extends contracts.Contract>(c: C, input: contracts.In<C>) => request(o.nc, c, input, { timeoutMs: 120_000, asserter: o.asserter });
  const view = (instance_id: string) => call(P.get, { user_id, instance_id });
  const until = async (instance_id: string, ok: (v: Awaited<ReturnType<typeof view>>) => boolean, ms: number) => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      if (ok(await view(instance_id))) return true;
      await sleep(50);
    }
    return false;
  };
  const wake: number[] = [];
  const held: number[] = [];
  const toSleep: number[] = [];
  const imageMb: number[] = [];
  const parts: NonNullable<Awaited<ReturnType<typeof cgroupRawMb>>>[] = [];
  let restored = 0;
  let booted = 0;
  let failures = 0;
  const c = await call(P.create, { user_id, tier: o.tier, framework: 'openclaw' });
  const container = `agenthost-${c.instance_id}`;
  const headers = { authorization: `Bearer ${c.access_token}` };
  try {
    if (!(await until(c.instance_id, (v) => v.status === 'running', 300_000))) throw new Error('the instance never ran');
    // Up a while before its first sleep, as an agent that served someone (its boot's garbage collected). Idle time
    // counts from the start, and a boot on a busy machine can outlast the deep time: a request first (it wakes the
    // agent if it already sleeps), so that each depth is reached in its turn.
    await sleep(20_000);
    await o.edge.request(`${c.url}/`, { headers, timeoutMs: 240_000 });
    for (let r = 0; r < o.rounds; r++) {
      const deepBefore = o.lines().filter((l) => l.includes(c.instance_id) && l.includes('idle instance put to sleep') && l.includes('"depth":"deep"')).length;
      // A failed dump stops the agent instead: seen at once, with the provisioner's reason.
      const deep = (v: Awaited<ReturnType<typeof view>>) => v.sleep_depth === o.depth || (o.depth === 'checkpointed' && v.sleep_depth === 'stopped');
      if (!(await until(c.instance_id, (v) => v.status === 'sleeping' && deep(v), 180_000))) {
        failures++;
        o.log(`${o.depth}: the instance did not fall asleep at that depth`);
        continue;
      }
      // The provisioner says `checkpointed` as the dump begins (the edges hear first, as for a freeze): the sleep is
      // done, image sealed, when its "put to sleep" line for the deep depth is logged. Measuring before that would
      // read the agent's memory still there and time a wake that waits for the dump and the seal.
      const deepDone = () =>
        o.lines().filter((l) => l.includes(c.instance_id) && l.includes('idle instance put to sleep') && l.includes('"depth":"deep"')).length;
      if (o.depth === 'checkpointed') {
        const deadline = Date.now() + 180_000;
        while (deepDone() <= deepBefore && Date.now() < deadline) await sleep(100);
      }
      if (o.depth === 'checkpointed' && (await view(c.instance_id)).sleep_depth !== 'checkpointed') {
        failures++;
        const why = o
          .lines()
          .filter((l) => l.includes(c.instance_id) && l.includes('could not be checkpointed'))
          .at(-1);
        o.log(`checkpointed round ${r + 1}: the dump failed, it sleeps stopped: ${why?.slice(0, 800)}`);
        await o.edge.request(`${c.url}/`, { headers, timeoutMs: 240_000 });
        continue;
      }
      if (o.depth === 'checkpointed') {
        // Settled: the dump's last pages freed.
        await sleep(2000);
        const cg = await cgroupRawMb(container);
        if (cg) parts.push(cg);
        held.push(cg?.usage ?? (await cgroupMb(container)));
        imageMb.push(duMb(path.join(o.checkpointDir ?? '', c.instance_id)));
      } else held.push((await cgroupMb(container)) + (await swapMb(container)) * zramRatio());
      const took = o
        .lines()
        .filter((l) => l.includes(c.instance_id) && l.includes('idle instance put to sleep'))
        .map((l) => Number(/"took_ms":(\d+)/.exec(l)?.[1]))
        .at(-1);
      if (took !== undefined && Number.isFinite(took)) toSleep.push(took);
      const t0 = performance.now();
      // A deep sleep's wake is a boot: on a busy machine longer than a plain request's 15 s.
      const res = await o.edge.request(`${c.url}/`, { headers, timeoutMs: 240_000 });
      const ms = performance.now() - t0;
      // An answer of the edge itself (still waking, failed) is in the API's shape with a code; the agent's is not.
      if (typeof res.json.code === 'string' && String(res.json.code).startsWith('INSTANCE_')) {
        failures++;
        o.log(`${o.depth} wake ${r + 1}: the edge answered ${res.status} ${String(res.json.code)} after ${Math.round(ms)} ms`);
      } else {
        wake.push(ms);
        let how = '';
        if (o.depth === 'checkpointed') {
          await sleep(500); // the provisioner's log line, read from its pipe
          const mine = o.lines().filter((l) => l.includes(c.instance_id));
          const restoredLines = mine.filter((l) => l.includes('instance restored from its checkpoint by a request'));
          const ok = restoredLines.length;
          const bad = mine.filter((l) => l.includes('could not be restored')).length;
          if (ok > restored) {
            restored = ok;
            // Where the wake went, by the provisioner's line: the open, CRIU's restore, the pages after it.
            const line = restoredLines.at(-1) ?? '';
            const part = (k: string) => new RegExp(`"${k}":(\\d+)`).exec(line)?.[1] ?? '?';
            how = `, restored: open ${part('open_ms')} ms, restore ${part('restore_ms')} ms, pages ${part('pages_ms')} ms`;
          } else if (bad > booted) {
            booted = bad;
            failures++;
            how = `, NOT restored (booted): ${mine
              .filter((l) => l.includes('could not be restored'))
              .at(-1)
              ?.slice(0, 600)}`;
          }
          how += `; image ${imageMb.at(-1)} MB`;
        }
        o.log(
          `${o.depth} wake ${r + 1}/${o.rounds}: ${res.status} from the agent after ${Math.round(ms)} ms (held ${Math.round(held.at(-1)!)} MB asleep${how})`,
        );
      }
    }
  } finally {
    await call(P.remove, { user_id, instance_id: c.instance_id }).catch(() => {});
  }
  return { wake, held, toSleep, imageMb, parts, restored, booted, failures };
}
