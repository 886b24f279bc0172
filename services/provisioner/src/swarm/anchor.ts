import { writeAtVersion } from '@agenthost/shared';
import type { DockerEngine } from '../docker/engine.ts';
import { dockerStatus, o } from '../docker/call.ts';
import { LABEL_MANAGED, LABEL_SCOPE } from '../docker/spec.ts';

/*
 * One idle task on the instance bridge on every prepared node, so that the bridge is never taken down there. The
 * swarm makes a node's bridge when the first task on it starts and removes it when the last one leaves; a removal
 * that fails half-way (moby#37087, #38318) leaves the engine refusing every later task on that network with
 * `network <id> exists` until it is restarted with its network store set aside. With the anchor the last instance
 * to leave a node is never the bridge's last task, and no create meets the bridge being made or removed.
 * It runs `sleep` as nobody, read-only, with no capability, no port and a few MB: nothing to reach, nothing to hold.
 */

const ANCHOR_LABEL = 'agenthost.anchor';
const anchorName = (network: string): string => `${network}-anchor`;

export function anchorSpec(a: { network: string; scope: string; image: string; nodeConstraint: string }) {
  return {
    Name: anchorName(a.network),
    Labels: { [LABEL_MANAGED]: 'true', [LABEL_SCOPE]: a.scope, [ANCHOR_LABEL]: 'true' },
    TaskTemplate: {
      ContainerSpec: {
        Image: a.image,
        Command: ['/bin/sleep', 'infinity'],
        User: '65534',
        ReadOnly: true,
        CapabilityDrop: ['ALL'],
        StopGracePeriod: 1_000_000_000,
      },
      // Only on nodes already prepared for instances (the label ensureOnNode sets): elsewhere the bridge's settings
      // are missing and every try would be refused.
      Placement: { Constraints: [a.nodeConstraint] },
      Resources: { Limits: { MemoryBytes: 16 * 1024 * 1024, NanoCPUs: 10_000_000, Pids: 4 } },
      RestartPolicy: { Condition: 'any', Delay: 5_000_000_000 },
      Networks: [{ Target: a.network }],
    },
    Mode: { Global: {} },
    EndpointSpec: { Mode: 'dnsrr' },
  };
}

/** The anchor as `spec` says: made when missing, its placement and image brought up to date when they changed. */
export async function ensureAnchor(engine: DockerEngine, spec: ReturnType<typeof anchorSpec>): Promise<void> {
  try {
    await engine.run('service create', () => engine.docker.createService(o(spec) as never));
    return;
  } catch (err) {
    if (dockerStatus(err) !== 409) throw err;
  }
  const service = engine.docker.getService(spec.Name);
  await writeAtVersion(
    async () => {
      const s = await engine.run('service inspect', (abortSignal) => service.inspect(o({ abortSignal })));
      return { version: s.Version?.Index as number, spec: s.Spec as typeof spec };
    },
    (version, next) => engine.run('service update', () => service.update({ version, ...next })),
    (current) => {
      const same =
        current.TaskTemplate?.ContainerSpec?.Image === spec.TaskTemplate.ContainerSpec.Image &&
        JSON.stringify(current.TaskTemplate?.Placement?.Constraints) === JSON.stringify(spec.TaskTemplate.Placement.Constraints);
      return same ? undefined : spec;
    },
  );
}
