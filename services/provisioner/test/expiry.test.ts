import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { contracts, publishEvent } from '@agenthost/shared';
import {
  recordSecret,
  signIn,
  startStack,
  subscribe,
  type Stack,
  cleanupDocker,
  docker,
  gatewayEnv,
  provisionerEnv,
  testNetwork,
  waitFor,
} from '@agenthost/testkit';

const network = testNetwork('expiry');
let stack: Stack;

beforeAll(async () => {
  await cleanupDocker(network);
  stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    serviceEnv: {
      provisioner: provisionerEnv({ network, ports: [18500, 18509] }),
      'billing-chain': { POLL_INTERVAL_SECONDS: '1' },
      gateway: gatewayEnv,
    },
  });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await cleanupDocker(network);
});

const running = async (id: string) => (await docker('inspect', '-f', '{{.State.Running}}', `agenthost-${id}`)).trim() === 'true';

describe('instances when the subscription ends', () => {
  it('stops the instances of a subscription that expired unpaid, keeps their data, and lets them start after renewal', async () => {
    const user = await signIn(stack.api);
    await subscribe(stack, user, { tier: 'pro' }); // no prepaid balance: renewal will fail
    const c = await user.api.post('/instance/create', { framework: 'openclaw' });
    expect(c.status).toBe(200);
    recordSecret(c.body.access_token);
    const id = c.body.instance_id as string;
    await waitFor('running', async () => (await user.api.get(`/instance/status/${id}`)).body.status === 'running');
    expect(await running(id)).toBe(true);

    // 31 days later on chain: the keeper's renew deactivates it, and the provisioner stops the instance.
    await stack.chain!.advanceClock(31 * 24 * 3600);
    await waitFor('container stopped', async () => !(await running(id)), 30_000, 250);
    expect((await user.api.get(`/instance/status/${id}`)).status).toBe(402);
    // Stopped, not deleted: the container and its volume are still there.
    expect((await docker('volume', 'ls', '-q')).split('\n')).toContain(`agenthost-${id}`);

    await subscribe(stack, user, { tier: 'pro' });
    const st = await user.api.get(`/instance/status/${id}`);
    expect(st.status).toBe(200);
    expect(st.body.status).toBe('stopped');
    expect((await user.api.post(`/instance/start/${id}`)).status).toBe(200);
    await waitFor('running again', async () => (await user.api.get(`/instance/status/${id}`)).body.status === 'running');
    expect((await user.api.del(`/instance/delete/${id}`)).status).toBe(200);
  });

  it("keeps a cancelled subscription's instances running until expiry", async () => {
    const user = await signIn(stack.api);
    await subscribe(stack, user, { tier: 'pro' });
    const c = await user.api.post('/instance/create', { framework: 'openclaw' });
    recordSecret(c.body.access_token);
    const id = c.body.instance_id as string;
    await waitFor('running', async () => (await user.api.get(`/instance/status/${id}`)).body.status === 'running');
    const { chainClient } = await import('@agenthost/testkit');
    await chainClient(stack).cancel(user.wallet);
    await waitFor('cancel seen', async () => (await user.api.post('/subscription/refresh')).body.cancelled === true);
    // Cancelled but not expired: still running, and no new instance.
    await sleep(2500);
    expect(await running(id)).toBe(true);
    expect((await user.api.post('/instance/create', { framework: 'openclaw' })).body.code).toBe('SUBSCRIPTION_CANCELLED');
    expect((await user.api.del(`/instance/delete/${id}`)).status).toBe(200);
  });

  it('acts on no forged subscription event: no access granted, no instance stopped', async () => {
    // Published with billing-chain's own identity, as a compromised billing-chain (or a leaked credential) could.
    const nc = await stack.nats.connect('billing-chain');
    try {
      const forge = (p: Record<string, unknown>) => publishEvent(nc, contracts.billing.subscriptionChanged, p as never, `forged-${randomUUID()}`);

      // A wallet with no subscription is announced as enterprise.
      const freeloader = await signIn(stack.api);
      expect((await freeloader.api.get('/instance/list')).status).toBe(402);
      await forge({
        wallet_address: freeloader.wallet.address,
        tier: 'enterprise',
        is_active: true,
        expires_at: new Date(Date.now() + 30 * 86400_000).toISOString(),
        cancelled: false,
        refreshed_at: new Date().toISOString(),
        reason: 'registered',
      });
      // A victim's subscription is announced as ended.
      const victim = await signIn(stack.api);
      await subscribe(stack, victim, { tier: 'pro' });
      const c = await victim.api.post('/instance/create', { framework: 'openclaw' });
      recordSecret(c.body.access_token);
      const id = c.body.instance_id as string;
      await waitFor('running', async () => (await victim.api.get(`/instance/status/${id}`)).body.status === 'running');
      await forge({
        wallet_address: victim.wallet.address,
        tier: 'pro',
        is_active: false,
        expires_at: new Date().toISOString(),
        cancelled: false,
        refreshed_at: new Date().toISOString(),
        reason: 'expired',
      });

      // Give both events time to be consumed (a real change is acted on within a second or two).
      await sleep(3000);
      for (let i = 0; i < 3; i++) expect((await freeloader.api.get('/instance/list')).status).toBe(402);
      expect((await freeloader.api.post('/instance/create', { framework: 'openclaw' })).status).toBe(402);
      expect(await running(id)).toBe(true);
      expect((await victim.api.get(`/instance/status/${id}`)).body.status).toBe('running');
      expect((await victim.api.del(`/instance/delete/${id}`)).status).toBe(200);
    } finally {
      await nc.close();
    }
  });
});
