// The openclaw bench's creates and removes through the provisioner's bus API, and its percentiles (run.ts).
import { contracts, request } from '../../packages/shared/src/index.ts';
import { sleep } from './container.ts';

type Nc = Parameters<typeof request>[0];
type Asserter = NonNullable<Parameters<typeof request>[3]>['asserter'];

export const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]! : NaN;
};
export const stats = (xs: number[]) => ({ n: xs.length, p50: Math.round(pct(xs, 50)), p99: Math.round(pct(xs, 99)), max: Math.round(Math.max(...xs)) });

/** `n` creates at once for `user_id`; each one's time to running (its status event), and how many failed. */
export async function createMany(
  o: { nc: Nc; asserter: Asserter; log: (msg: string) => void; tier: string },
  user_id: string,
  n: number,
): Promise<{ ms: number[]; ids: string[]; failures: number }> {
  const { nc, asserter, log } = o;
  const P = contracts.provisioner;
  const done = new Map<string, number>();
  const sub = nc.subscribe('events.instance.status', {
    callback: (_e: unknown, m: { data: Uint8Array }) => {
      const e = JSON.parse(new TextDecoder().decode(m.data)) as { instance_id: string; status: string };
      if (e.status === 'running' || e.status === 'failed') done.set(e.instance_id, e.status === 'running' ? performance.now() : -1);
    },
  });
  const started = new Map<string, number>();
  let failures = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      const t0 = performance.now();
      try {
        const c = await request(nc, P.create, { user_id, tier: o.tier as 'pro', framework: 'openclaw' }, { timeoutMs: 120_000, asserter });
        started.set(c.instance_id, t0);
      } catch (err) {
        failures++;
        log(`create failed: ${(err as Error).message}`);
      }
    }),
  );
  const deadline = Date.now() + 300_000;
  while ([...started.keys()].some((id) => !done.has(id)) && Date.now() < deadline) await sleep(50);
  sub.unsubscribe();
  const ms: number[] = [];
  for (const [id, t0] of started) {
    const t1 = done.get(id);
    if (t1 === undefined || t1 < 0) failures++;
    else ms.push(t1 - t0);
  }
  return { ms, ids: [...started.keys()], failures };
}

export const removeAll = (o: { nc: Nc; asserter: Asserter }, user_id: string, ids: string[]) =>
  Promise.all(
    ids.map((instance_id) =>
      request(o.nc, contracts.provisioner.remove, { user_id, instance_id }, { timeoutMs: 120_000, asserter: o.asserter }).catch(() => {}),
    ),
  );
