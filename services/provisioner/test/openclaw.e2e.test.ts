import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts } from '@agenthost/shared';
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

const P = contracts.provisioner;
const network = testNetwork('oc');

let stack: Stack;
let n: Nats;

beforeAll(async () => {
  await cleanupDocker(network);
  const env = provisionerEnv({ network, ports: [18270, 18279] });
  // The real image map and tier resources (OpenClaw needs more than the stand-in's test limits).
  delete env.FRAMEWORK_IMAGES;
  delete env.TIER_LIMITS_JSON;
  stack = await startStack({
    services: ['keyvault', 'provisioner'],
    serviceEnv: { provisioner: { ...env, READY_TIMEOUT_SECONDS: '150' }, gateway: gatewayEnv },
  });
  n = await natsClient(stack.nats);
});

afterAll(async () => {
  await n?.close();
  await stack?.stop();
  await cleanupDocker(network);
});

describe('the real OpenClaw image', () => {
  it('creates an OpenClaw instance that reaches running and serves its gateway', async () => {
    const user_id = newUser();
    const c = await n.call(P.create, { user_id, tier: 'free', framework: 'openclaw' });
    expect(c.status).toBe('provisioning');
    const info = JSON.parse(await docker('inspect', `agenthost-${c.instance_id}`))[0];
    // Created from the image the version resolved to at create (its ID), not the moving tag.
    expect(info.Config.Image).toBe((await docker('image', 'inspect', 'agenthost/openclaw:latest', '--format', '{{.Id}}')).trim());
    expect(info.HostConfig.Memory).toBe(1536 * 1024 * 1024);
    expect(info.Config.Env).toContain('NODE_OPTIONS=--max-old-space-size=1152');

    const up = await waitFor(
      'openclaw running',
      async () => {
        const v = await n.call(P.get, { user_id, instance_id: c.instance_id });
        if (v.status === 'failed') throw new Error(`failed: ${v.failure_reason}`);
        return v.status === 'running' ? v : undefined;
      },
      120_000,
      500,
    );
    expect(up.memory_usage_mb).toBeGreaterThan(50);
    expect(up.memory_usage_mb).toBeLessThan(1536);
    expect((await fetch(`http://127.0.0.1:${c.port}/healthz`)).status).toBe(200);
    // The bootstrap fetched the (empty) key set through the gateway before starting OpenClaw.
    const logs = await n.call(P.logs, { user_id, instance_id: c.instance_id, tail: 500 });
    expect(logs.lines.join('\n')).toMatch(/keys (fetched|loaded)/);
    expect(logs.lines.join('\n')).not.toContain(c.access_token!);
    await n.call(P.remove, { user_id, instance_id: c.instance_id });
  }, 180_000);
});
