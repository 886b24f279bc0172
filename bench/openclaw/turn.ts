// The first agent turn after a wake, in the openclaw bench: a real OpenClaw instance answers a chat message through
// the edge (its OpenAI-compatible endpoint), its model being a stub provider on this host
// (packages/testkit/src/openclaw-llm.ts).
// Each round boots the agent anew (a restart), times its first turn (an agent that never slept), lets it fall into a
// light sleep (or, with `depth: 'checkpointed'`, waits for its checkpointed deep sleep) and times the first turn after
// (the request wakes it), then one more turn awake (the turn's floor).
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { contracts, request } from '../../packages/shared/src/index.ts';
import { type Edge, startTestLlm, useTestLlm } from '../../packages/testkit/src/index.ts';
import { sleep } from './container.ts';

type Nc = Parameters<typeof request>[0];
type Asserter = NonNullable<Parameters<typeof request>[3]>['asserter'];
const P = contracts.provisioner;

export async function firstTurns(o: {
  nc: Nc;
  edge: Edge;
  asserter: Asserter;
  rounds: number;
  tier: contracts.TierName;
  depth?: 'checkpointed';
  /** With `depth`: the provisioner's image directory of this scope, where a sealed image appears whole. */
  checkpointDir?: string;
  log: (m: string) => void;
}) {
  const user_id = randomUUID();
  const call = <C extends contracts.Contract>(c: C, input: contracts.In<C>) => request(o.nc, c, input, { timeoutMs: 120_000, asserter: o.asserter });
  const until = async (instance_id: string, status: string, ms: number, depth?: string) => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      const v = await call(P.get, { user_id, instance_id });
      if (v.status === status && (!depth || v.sleep_depth === depth || v.sleep_depth === 'stopped')) return v.sleep_depth === (depth ?? v.sleep_depth);
      await sleep(50);
    }
    return false;
  };
  const llm = await startTestLlm();
  const never: number[] = [];
  const woken: number[] = [];
  const awake: number[] = [];
  let failures = 0;
  const c = await call(P.create, { user_id, tier: o.tier, framework: 'openclaw' });
  const turn = async () => {
    const t0 = performance.now();
    // A turn without an answer is a failure of its round, not of the rows measured before it.
    const r = await o.edge
      .request(`${c.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${c.access_token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openclaw', messages: [{ role: 'user', content: 'ping' }] }),
        // An agent's first turn after its boot loads its plugin catalog first.
        timeoutMs: 120_000,
      })
      .catch((err: Error) => ({ status: 0, text: err.message }));
    const ms = performance.now() - t0;
    if (r.status !== 200) {
      failures++;
      o.log(`turn: ${r.status} ${r.text.slice(0, 200)}`);
      return undefined;
    }
    return ms;
  };
  try {
    if (!(await until(c.instance_id, 'running', 300_000))) throw new Error('the turn instance never ran');
    // It may have fallen asleep already (idle time counts from its start): a request wakes it for the edit.
    await o.edge.request(`${c.url}/`, { headers: { authorization: `Bearer ${c.access_token}` }, timeoutMs: 240_000 });
    await useTestLlm(`agenthost-${c.instance_id}`, llm.port, 'sk-bench-stub');
    for (let r = 0; r < o.rounds; r++) {
      await call(P.restart, { user_id, instance_id: c.instance_id });
      if (!(await until(c.instance_id, 'running', 300_000))) throw new Error('the turn instance did not restart');
      const first = await turn();
      if (first !== undefined) never.push(first);
      if (!(await until(c.instance_id, 'sleeping', 180_000, o.depth))) {
        failures++;
        o.log(`turn round ${r + 1}: it did not fall asleep${o.depth ? ` ${o.depth}` : ''}`);
        continue;
      }
      // The row says `checkpointed` as the dump begins: a turn sent then waits for the dump and the seal as well as
      // the wake (7.5-8.5 s on 1 Dec). The wake is timed from a finished checkpoint, its image sealed in place.
      if (o.checkpointDir) {
        const image = path.join(o.checkpointDir, c.instance_id);
        const deadline = Date.now() + 180_000;
        while (!existsSync(image) && Date.now() < deadline) await sleep(100);
        await sleep(2000); // settled, as the wake rows measure it
      }
      const afterWake = await turn();
      if (afterWake !== undefined) woken.push(afterWake);
      const again = await turn();
      if (again !== undefined) awake.push(again);
      o.log(
        `turn round ${r + 1}/${o.rounds}: first turn ${Math.round(first ?? NaN)} ms, after a wake ${Math.round(afterWake ?? NaN)} ms, awake ${Math.round(again ?? NaN)} ms`,
      );
    }
  } finally {
    llm.stop();
    await call(P.remove, { user_id, instance_id: c.instance_id }).catch(() => {});
  }
  return { never, woken, awake, failures };
}
