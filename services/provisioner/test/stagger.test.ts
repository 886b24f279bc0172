import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Subscription } from 'nats';
import { contracts, listen } from '@agenthost/shared';
import {
  startStack,
  type Stack,
  cleanupDocker,
  docker,
  gatewayEnv,
  natsClient,
  newUser,
  provisionerEnv,
  testNetwork,
  waitFor,
  type Nats,
} from '@agenthost/testkit';

// Staggered starts (issue #17): with STARTS_AT_ONCE=1, a burst of creates boots one agent at a time (each stand-in
// takes READY_MS to become ready), so a host never holds every agent's start-up peak at once; every create still
// answers and every instance runs.
const P = contracts.provisioner;
const network = testNetwork('stagger');
const READY_MS = 1500;
const BURST = 3;

let stack: Stack;
let n: Nats;
let sub: Subscription;
const running = new Map<string, number>();

beforeAll(async () => {
  await cleanupDocker(network);
  stack = await startStack({
    services: ['keyvault', 'provisioner'],
    serviceEnv: {
      provisioner: provisionerEnv({
        network,
        ports: [18770, 18779],
        extra: { STARTS_AT_ONCE: '1', START_QUEUE_MAX_SECONDS: '25', INSTANCE_EXTRA_ENV_JSON: JSON.stringify({ STANDIN_READY_DELAY_MS: String(READY_MS) }) },
      }),
      gateway: gatewayEnv,
    },
  });
  n = await natsClient(stack.nats);
  sub = listen(
    n.nc,
    P.instanceStatusChanged,
    (e) => {
      if (e.status === 'running') running.set(e.instance_id, Date.parse(e.at));
    },
    undefined,
  );
});

afterAll(async () => {
  sub?.unsubscribe();
  try {
    await n?.close();
    await stack?.stop();
  } finally {
    await cleanupDocker(network);
  }
});

describe('staggered starts', () => {
  it('boots a burst of creates one agent at a time, and every instance runs', async () => {
    const user_id = newUser();
    const created = await Promise.all(Array.from({ length: BURST }, () => n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' }, 90_000)));
    const ids = created.map((c) => c.instance_id);
    await waitFor('every instance running', async () => (ids.every((id) => running.has(id)) ? true : undefined), 60_000);
    const starts = await Promise.all(
      ids.map(async (id) => ({ id, started: Date.parse((await docker('inspect', '-f', '{{.State.StartedAt}}', `agenthost-${id}`)).trim()) })),
    );
    starts.sort((a, b) => a.started - b.started);
    // Each agent was started only once the one before it was ready.
    for (let i = 1; i < starts.length; i++) {
      const before = starts[i - 1]!;
      expect(starts[i]!.started, `${starts[i]!.id} started before ${before.id} was ready`).toBeGreaterThanOrEqual(running.get(before.id)!);
    }
    for (const id of ids) await n.call(P.remove, { user_id, instance_id: id });
  });
});
