// The wake measurement of the openclaw bench: a real OpenClaw instance put to sleep by the provisioner (tier free,
// idle sleep after a few seconds in this bench), then one HTTPS request to its URL through the edge; the time from
// sending it to the agent's answer (the edge holds the request while the instance wakes).
import { randomUUID } from 'node:crypto';
import { contracts, request } from '../../packages/shared/src/index.ts';
import type { Edge } from '../../packages/testkit/src/index.ts';
import { sleep } from './container.ts';

type Nc = Parameters<typeof request>[0];
type Asserter = NonNullable<Parameters<typeof request>[3]>['asserter'];

const P = contracts.provisioner;

export async function wakeThroughEdge(o: { nc: Nc; edge: Edge; asserter: Asserter; rounds: number; log: (m: string) => void }) {
  const user_id = randomUUID();
  const call = <C extends contracts.Contract>(c: C, input: contracts.In<C>) => request(o.nc, c, input, { timeoutMs: 120_000, asserter: o.asserter });
  const statusOf = async (instance_id: string) => (await call(P.get, { user_id, instance_id })).status;
  const until = async (instance_id: string, status: string, ms: number) => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      if ((await statusOf(instance_id)) === status) return true;
      await sleep(100);
    }
    return false;
  };
  const ms: number[] = [];
  let failures = 0;
  const c = await call(P.create, { user_id, tier: 'free', framework: 'openclaw' });
  try {
    if (!(await until(c.instance_id, 'running', 300_000))) throw new Error('the wake instance never ran');
    for (let r = 0; r < o.rounds; r++) {
      if (!(await until(c.instance_id, 'sleeping', 120_000))) {
        failures++;
        o.log('the instance did not fall asleep');
        continue;
      }
      const t0 = performance.now();
      const res = await o.edge.request(`${c.url}/`);
      const took = performance.now() - t0;
      // An answer of the edge itself (still waking, failed) is in the API's shape with a code; the agent's is not.
      if (typeof res.json.code === 'string' && String(res.json.code).startsWith('INSTANCE_')) {
        failures++;
        o.log(`wake ${r + 1}: the edge answered ${res.status} ${String(res.json.code)} after ${Math.round(took)} ms`);
      } else {
        ms.push(took);
        o.log(`wake ${r + 1}/${o.rounds}: ${res.status} from the agent after ${Math.round(took)} ms`);
      }
    }
  } finally {
    await call(P.remove, { user_id, instance_id: c.instance_id }).catch(() => {});
  }
  return { ms, failures };
}
