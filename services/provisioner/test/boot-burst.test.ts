import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
import { docker, newUser, waitFor } from '@agenthost/testkit';
import { instanceSuite } from './helpers.ts';

// Boot on a burst (BOOT_CPUS): an agent of a tier with half a CPU boots with up to two, and has its tier's half once
// it answers /readyz, before its status says running. The stand-in takes READY_MS to be ready, so the boot can be
// seen. Ports of this suite: 19730-19732.
const P = contracts.provisioner;
const READY_MS = 4000;
const BURST = Math.min(2, availableParallelism());
const suite = instanceSuite('burst', [19730, 19732], { BOOT_CPUS: '2', INSTANCE_EXTRA_ENV_JSON: JSON.stringify({ STANDIN_READY_DELAY_MS: String(READY_MS) }) });

const nanoCpus = async (id: string) => Number((await docker('inspect', '-f', '{{.HostConfig.NanoCpus}}', `agenthost-${id}`)).trim());

describe('boot on a burst', () => {
  it('starts the agent with more CPU than its tier’s share and sets it to the share before it counts as running', async () => {
    const user_id = newUser();
    const c = await suite.n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' }, 90_000);
    expect((await suite.n.call(P.get, { user_id, instance_id: c.instance_id })).status).toBe('provisioning');
    expect(await nanoCpus(c.instance_id)).toBe(BURST * 1e9);
    await waitFor('running', async () => (await suite.n.call(P.get, { user_id, instance_id: c.instance_id })).status === 'running' || undefined, 60_000, 100);
    expect(await nanoCpus(c.instance_id)).toBe(0.5e9);
    // A restart boots on the burst again, and ends at the share again.
    await suite.n.call(P.restart, { user_id, instance_id: c.instance_id });
    expect(await nanoCpus(c.instance_id)).toBe(BURST * 1e9);
    await waitFor(
      'running again',
      async () => (await suite.n.call(P.get, { user_id, instance_id: c.instance_id })).status === 'running' || undefined,
      60_000,
      100,
    );
    expect(await nanoCpus(c.instance_id)).toBe(0.5e9);
    await suite.n.call(P.remove, { user_id, instance_id: c.instance_id });
  });
});
