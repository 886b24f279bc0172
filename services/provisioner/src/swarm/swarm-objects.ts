import type { DockerEngine } from '../docker/engine.ts';
import { o, ignoreGone } from '../docker/call.ts';
import { LABEL_INSTANCE, LABEL_SCOPE } from '../docker/spec.ts';
import type { ManagedObject } from '../domain/runtime.ts';
import { nodeSources } from './node-firewall.ts';
import { isDraining } from './placement.ts';

// What the swarm runtime reads of the swarm as a whole, apart from its per-instance operations (runtime.ts): the
// objects of its scope (for the reconciler's orphan sweep) and the nodes' states (for node_down and drains).

/** Every swarm object of the scope that belongs to an instance (services, networks, secrets), with how to remove it. */
export async function managedObjects(engine: DockerEngine, scope: string, removeService: (instanceId: string) => Promise<void>): Promise<ManagedObject[]> {
  const filters = { label: [`${LABEL_SCOPE}=${scope}`] };
  const [services, networks, secrets] = await Promise.all([
    engine.run('service list', (abortSignal) => engine.docker.listServices(o({ filters, abortSignal }))),
    engine.run('network list', (abortSignal) => engine.docker.listNetworks(o({ filters, abortSignal }))),
    engine.run('secret list', (abortSignal) => engine.docker.listSecrets(o({ filters, abortSignal }))),
  ]);
  const out: ManagedObject[] = [];
  for (const s of services) {
    const instanceId = s.Spec?.Labels?.[LABEL_INSTANCE];
    if (instanceId) out.push({ instanceId, kind: 'service', remove: () => removeService(instanceId) });
  }
  for (const n of networks) {
    const instanceId = n.Labels?.[LABEL_INSTANCE];
    if (instanceId)
      out.push({
        instanceId,
        kind: 'network',
        remove: async () => void (await ignoreGone(engine.run('network remove', (abortSignal) => engine.docker.getNetwork(n.Id).remove(o({ abortSignal }))))),
      });
  }
  for (const s of secrets) {
    const instanceId = s.Spec?.Labels?.[LABEL_INSTANCE];
    if (instanceId)
      out.push({
        instanceId,
        kind: 'secret',
        remove: async () => void (await ignoreGone(engine.run('secret remove', (abortSignal) => engine.docker.getSecret(s.ID).remove(o({ abortSignal }))))),
      });
  }
  return out;
}

/**
 * After a node returns, how long the reconciler is asked to look on every tick: its instances' tasks run again
 * seconds after the node is prepared, and the reconciler is what turns their rows from node_down to running (its own
 * schedule is every RECONCILE_INTERVAL_SECONDS, 30 by default: half the time an instance has to be back in).
 */
const RETURN_WATCH_MS = 90_000;

export function watchNodes(
  engine: DockerEngine,
  readySince: Map<string, number>,
  changed: () => void,
  everyMs: number,
  returned: (node: string) => void = () => {},
  /** The ready nodes, at the first pass and whenever a node's address joins or leaves the swarm. */
  regrouped: (readyNodes: string[]) => void = () => {},
): () => void {
  let last = '';
  let addrs = '';
  let first = true;
  const timer = setInterval(() => {
    if (!engine.available) return;
    void engine
      .run('node list', (abortSignal) => engine.docker.listNodes(o({ abortSignal })))
      .then((nodes) => {
        for (const n of nodes) {
          if (n.Status?.State !== 'ready') readySince.delete(n.ID!);
          // Ready when first seen counts as settled; a return seen later counts from now.
          else if (!readySince.has(n.ID!)) {
            readySince.set(n.ID!, first ? 0 : Date.now());
            if (!first) returned(n.ID!);
          }
        }
        first = false;
        const nowAddrs = nodeSources(nodes).join(',');
        if (nowAddrs !== addrs) regrouped(nodes.filter((n) => n.Status?.State === 'ready').map((n) => n.ID!));
        addrs = nowAddrs;
        const now = nodes
          .map((n) => `${n.ID}:${n.Status?.State}:${n.Spec?.Availability}:${isDraining(n)}`)
          .sort()
          .join(',');
        // readySince holds each ready node's return time (0: ready when first seen).
        const returnedAt = Math.max(0, ...readySince.values());
        if ((last && now !== last) || Date.now() - returnedAt < RETURN_WATCH_MS) changed();
        last = now;
      })
      .catch(() => {});
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
