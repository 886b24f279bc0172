import { startEdge, startStack, waitFor, type Edge, type Session, type Stack, gatewayEnv, provisionerEnv } from '@agenthost/testkit';

/**
 * The provisioner settings of a suite with the real OpenClaw image: the pro tier's real resources, and no host firewall
 * (the stub model provider listens on this host, which the firewall would let instances reach only for the gateway).
 */
export const realOpenclaw = {
  FRAMEWORK_IMAGES: JSON.stringify({ openclaw: 'agenthost/openclaw' }),
  TIER_LIMITS_JSON: JSON.stringify({ pro: { memory_mb: 2048, cpus: 1, pids: 512 } }),
  READY_TIMEOUT_SECONDS: '150',
  FIREWALL: 'off',
};

/**
 * The system of an idle-sleep suite: the services on a devchain, the provisioner with instances at https URLs of the
 * edge, `idle` seconds to a light sleep and `deep` seconds to a deep one per tier (checked every second; a tier left
 * out never sleeps at that depth), and the edge reporting traffic every second.
 */
export async function sleepStack(o: {
  network: string;
  ports: [number, number];
  edgePorts: { https: number; http: number };
  idle: Record<string, number>;
  deep?: Record<string, number>;
  provisioner?: Record<string, string>;
  edge?: Record<string, string>;
}): Promise<{ stack: Stack; edge: Edge }> {
  const stack = await startStack({
    services: ['auth', 'billing-chain', 'keyvault', 'provisioner'],
    devchain: true,
    serviceEnv: {
      provisioner: provisionerEnv({
        network: o.network,
        ports: o.ports,
        extra: {
          INSTANCE_URL_TEMPLATE: `https://{id}.agenthost.localhost:${o.edgePorts.https}`,
          SLEEP_AFTER_IDLE_SECONDS_JSON: JSON.stringify(o.idle),
          DEEP_SLEEP_AFTER_IDLE_SECONDS_JSON: JSON.stringify(o.deep ?? {}),
          SLEEP_CHECK_INTERVAL_SECONDS: '1',
          ...o.provisioner,
        },
      }),
      gateway: gatewayEnv,
    },
  });
  try {
    const edge = await startEdge(stack, { httpsPort: o.edgePorts.https, httpPort: o.edgePorts.http, env: { EDGE_ACTIVITY_SECONDS: '1', ...o.edge } });
    return { stack, edge };
  } catch (err) {
    await stack.stop(); // the suite's afterAll has no stack to stop yet
    throw err;
  }
}

/** The owner's view of an instance, as GET /instance/status shows it. */
export const statusOf = async (s: Session, id: string) =>
  (await s.api.get(`/instance/status/${id}`)).body as { status: string; sleep_depth?: string; failure_reason?: string };

/** Waits for the instance to run; a failed one fails the wait at once, with its reason. */
export async function untilRunning(s: Session, id: string): Promise<void> {
  await waitFor(
    'instance running',
    async () => {
      const v = await statusOf(s, id);
      if (v.status === 'failed') throw new Error(`failed: ${v.failure_reason}`);
      return v.status === 'running' || undefined;
    },
    150_000,
    500,
  );
}
