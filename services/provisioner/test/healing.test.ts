import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Subscription } from 'nats';
import type { z } from 'zod';
import { contracts, listen } from '@agenthost/shared';
import {
  startStack,
  type Stack,
  cleanupDocker,
  docker,
  gatewayEnv,
  dockerTry,
  natsClient,
  STANDIN,
  standinVariant,
  newUser,
  provisionerEnv,
  testNetwork,
  waitFor,
  type Nats,
} from '@agenthost/testkit';

const P = contracts.provisioner;
const network = testNetwork('heal');
const PORTS: [number, number] = [18750, 18759];
const INITIAL_MS = 500;

let stack: Stack;
let n: Nats;
let sub: Subscription;
const events: z.output<typeof P.instanceStatusChanged.payload>[] = [];

beforeAll(async () => {
  await cleanupDocker(network);
  stack = await startStack({
    services: ['keyvault', 'provisioner'],
    serviceEnv: {
      provisioner: provisionerEnv({
        network,
        ports: PORTS,
        extra: { RESTART_BACKOFF_INITIAL_MS: String(INITIAL_MS), RESTART_FAILED_AFTER: '5', RESTART_STABLE_SECONDS: '600' },
      }),
      gateway: gatewayEnv,
    },
  });
  n = await natsClient(stack.nats);
  // Every status event as it is published (JetStream messages reach core subscribers too).
  sub = listen(n.nc, P.instanceStatusChanged, (e) => void events.push(e), undefined);
});

afterAll(async () => {
  sub?.unsubscribe();
  await dockerTry('rmi', `${STANDIN}:t-heal-bootonce`, `${STANDIN}:t-heal-crash`);
  try {
    await n?.close();
    await stack?.stop();
  } finally {
    await cleanupDocker(network);
  }
});

const inspect = async (id: string) =>
  JSON.parse(await docker('inspect', `agenthost-${id}`))[0] as { Id: string; State: { StartedAt: string; FinishedAt: string; Pid: number } };

describe('self-healing of a crashing agent', () => {
  it('restarts an agent killed five times, each time after a longer delay, and shows the restarts in status and events', async () => {
    const user_id = newUser();
    const { instance_id } = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw' });
    const status = () => n.call(P.get, { user_id, instance_id });
    await waitFor('running', async () => ((await status()).status === 'running' ? true : undefined), 60_000);
    // An init process is PID 1: it reaps zombies and forwards signals to the agent.
    expect(await docker('exec', `agenthost-${instance_id}`, 'cat', '/proc/1/comm')).toMatch(/init/);
    const containerId = (await inspect(instance_id)).Id;

    const waited: number[] = [];
    for (let k = 1; k <= 5; k++) {
      // Odd: the engine kills the container's init; even: every process but the init is killed from inside.
      if (k % 2) await docker('kill', '--signal', 'KILL', `agenthost-${instance_id}`);
      else await docker('exec', `agenthost-${instance_id}`, 'sh', '-c', 'kill -KILL -1');
      const crash = await waitFor(
        `crash ${k} announced`,
        async () => events.find((e) => e.instance_id === instance_id && e.exit_reason && e.restarts === k - 1),
        30_000,
        100,
      );
      expect(crash).toMatchObject({
        user_id,
        status: k < 5 ? 'provisioning' : 'failed',
        exit_reason: 'killed by SIGKILL (exit code 137)',
        next_restart_at: expect.any(String),
      });
      if (k === 5) expect(crash.failure_reason).toMatch(/keeps crashing: 5 times in a row, last killed by SIGKILL/);
      const back = await waitFor(
        `back after crash ${k}`,
        async () => {
          const s = await status();
          return s.status === 'running' && s.restarts === k ? s : undefined;
        },
        60_000,
        200,
      );
      expect(back).toMatchObject({ last_exit_reason: 'killed by SIGKILL (exit code 137)', last_exit_at: expect.any(String) });
      expect(back.next_restart_at).toBeUndefined();
      expect(back.failure_reason).toBeUndefined();
      // The same container came back (same volume, port and token), not before its delay was over.
      const c = await inspect(instance_id);
      expect(c.Id).toBe(containerId);
      const nextRestart = Date.parse(crash.next_restart_at as string);
      expect(Date.parse(c.State.StartedAt)).toBeGreaterThanOrEqual(nextRestart);
      waited.push(Date.parse(c.State.StartedAt) - Date.parse(back.last_exit_at!));
    }
    // Each restart waited at least its delay after the exit the engine recorded, and the delays double:
    // 0.5, 1, 2, 4, 8 s (only lower bounds are asserted: a busy machine adds its own latency on top).
    for (let k = 0; k < 5; k++) expect(waited[k], `restart ${k + 1}`).toBeGreaterThanOrEqual(INITIAL_MS * 2 ** k);
    // The fifth crash in a row was announced as failed, and the recovery after it as running.
    const mine = events.filter((e) => e.instance_id === instance_id).map((e) => e.status);
    expect(mine.filter((s) => s === 'failed')).toHaveLength(1);
    expect(mine.at(-1)).toBe('running');
    await n.call(P.remove, { user_id, instance_id });
  }, 300_000);

  it('boots an agent again that exited before it was first ready, and it runs (a boot that failed for a moment)', async () => {
    // Exits with 78 in the first boot of its volume only, as a real OpenClaw does when its state worker is not ready
    // within 5 s on a starved host.
    await standinVariant('t-heal-bootonce', { STANDIN_EXIT_AFTER_MS: '0', STANDIN_EXIT_CODE: '78', STANDIN_EXIT_BOOTS: '1' });
    const user_id = newUser();
    const { instance_id } = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw', version: 't-heal-bootonce' });
    const running = await waitFor(
      'running after a second boot',
      async () => {
        const s = await n.call(P.get, { user_id, instance_id });
        if (s.status === 'failed') throw new Error(`failed: ${s.failure_reason}`);
        return s.status === 'running' ? s : undefined;
      },
      60_000,
      200,
    );
    expect(running).toMatchObject({ restarts: 1, last_exit_reason: 'exited with code 78', last_exit_kind: 'exit' });
    expect(running.failure_reason).toBeUndefined();
    const mine = events.filter((e) => e.instance_id === instance_id);
    expect(mine.find((e) => e.exit_reason)).toMatchObject({ status: 'provisioning', exit_reason: 'exited with code 78', next_restart_at: expect.any(String) });
    expect(mine.map((e) => e.status)).not.toContain('failed');
    expect(JSON.parse(await docker('exec', `agenthost-${instance_id}`, 'cat', '/data/standin-state.json')).boots).toBe(2);
    await n.call(P.remove, { user_id, instance_id });
  }, 120_000);

  it('fails an agent that exits before it is ready at every boot, after BOOT_RETRIES (2) more boots, and says so', async () => {
    await standinVariant('t-heal-crash', { STANDIN_EXIT_AFTER_MS: '0', STANDIN_EXIT_CODE: '3' });
    const user_id = newUser();
    const { instance_id } = await n.call(P.create, { user_id, tier: 'pro', framework: 'openclaw', version: 't-heal-crash' });
    const failed = await waitFor(
      'failed',
      async () => {
        const s = await n.call(P.get, { user_id, instance_id });
        return s.status === 'failed' ? s : undefined;
      },
      60_000,
      200,
    );
    expect(failed.failure_reason).toBe('The agent exited with code 3 before it was ready; it was booted 3 times');
    // Each boot but the last was announced with its exit; the agent's volume counted three boots, and no more come.
    const exits = events.filter((e) => e.instance_id === instance_id && e.exit_reason);
    expect(exits.map((e) => [e.status, e.exit_reason])).toEqual([
      ['provisioning', 'exited with code 3'],
      ['provisioning', 'exited with code 3'],
    ]);
    await new Promise((r) => setTimeout(r, 3 * INITIAL_MS));
    const image = `${STANDIN}:t-heal-crash`;
    const state = await docker('run', '--rm', '-v', `agenthost-${instance_id}:/data:ro`, '--entrypoint', 'cat', image, '/data/standin-state.json');
    expect(JSON.parse(state).boots).toBe(3);
    // Its owner can start it again.
    expect((await n.call(P.restart, { user_id, instance_id })).status).toBe('provisioning');
    await n.call(P.remove, { user_id, instance_id });
  }, 120_000);
});
