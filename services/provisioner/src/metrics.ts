import { children, counter, gauge, histogram } from '@agenthost/shared';
import type { InstanceReads } from './domain/instance-reads.ts';

// The provisioner's metrics. No instance, user or wallet ids as labels: states, reasons and operations only.

const readySeconds = histogram(
  'agenthost_instance_ready_seconds',
  'Time from an instance container start to its agent answering readiness (create or restart → running)',
  [],
  [1, 2, 5, 10, 20, 30, 60, 120, 300],
);
export const observeReady = (seconds: number): void => readySeconds.observe(seconds);

const restarts = counter('agenthost_instance_restarts_total', 'Crashed agents started again by the provisioner (self-healing, domain/healing.ts)');
const exits = counter(
  'agenthost_instance_exits_total',
  'Instance containers that exited, by reason (oom: killed at its memory limit, crash: non-zero exit, stopped: exit 0, SIGKILL or SIGTERM)',
  ['reason'],
);
const oomKills = counter('agenthost_instance_oom_kills_total', 'Instance containers killed by the kernel for exceeding their memory limit');
const exitChild = children((reason) => exits.labels(reason!));

/** A crashed agent started again. */
export const observeRestart = (): void => restarts.inc();

/** Containers the engine reported an OOM kill for, until their `die` (which follows it): that exit is an OOM kill. */
const oomed = new Set<string>();

/** An engine event of one of our instance containers (docker/events.ts follows them). */
export function observeContainerEvent(action: 'die' | 'oom', containerId: string, exitCode?: string): void {
  if (action === 'oom') {
    oomKills.inc();
    if (oomed.size > 10_000) oomed.clear(); // bounded: an oom whose die never came is forgotten
    oomed.add(containerId);
    return;
  }
  // The kernel's SIGKILL (exit 137) is not a stop: without the oom event it would read as one.
  if (oomed.delete(containerId)) exitChild('oom').inc();
  else exitChild(exitCode === '137' || exitCode === '0' || exitCode === '143' ? 'stopped' : 'crash').inc();
}

const poolClaims = counter(
  'agenthost_warm_pool_claims_total',
  'Creates the warm pool could serve (WARM_POOL_JSON), by result: restored (a pooled agent, running at once), booted (claimed but it could not be restored: it boots), empty (none ready: the create boots)',
  ['result'],
);
const poolClaimChild = children((result) => poolClaims.labels(result!));
export const observePoolClaim = (result: 'restored' | 'booted' | 'empty'): void => poolClaimChild(result).inc();

const dockerErrors = counter(
  'agenthost_docker_errors_total',
  'Docker Engine API calls that failed, by operation and kind (unavailable: engine down or timed out; answered: the engine refused)',
  ['operation', 'kind'],
);
const dockerErrorChild = children((op, kind) => dockerErrors.labels(op!, kind!));
export const observeDockerError = (operation: string, kind: 'unavailable' | 'answered'): void => dockerErrorChild(operation, kind).inc();

/** Instances by state, read from the provisioner's table when scraped (all replicas agree on it). */
export function instancesByState(instances: Pick<InstanceReads, 'countByStatus'>): void {
  gauge('agenthost_instances', 'Instances by state', ['state'], async function () {
    const rows = await instances.countByStatus();
    this.reset();
    for (const r of rows) this.labels(r.status).set(r.n);
  });
}

/**
 * The swarm's room per node, as placement sees it when scraped (swarm/placement.ts): unreserved memory and the
 * instances pinned there. Labelled by node hostname (an operator's name, no user's).
 */
export function swarmCapacity(room: () => Promise<Array<{ hostname: string; freeBytes: number; instances: number }>>): void {
  const nodes = () => room().catch(() => []);
  gauge(
    'agenthost_swarm_node_unreserved_memory_bytes',
    'Memory of a swarm node not reserved by any task meant to run there (placement puts a new instance on the node with the most)',
    ['node'],
    async function () {
      this.reset();
      for (const n of await nodes()) this.labels(n.hostname).set(n.freeBytes);
    },
  );
  gauge('agenthost_swarm_node_instances', 'Instances pinned to a swarm node (started, or created a moment ago)', ['node'], async function () {
    this.reset();
    for (const n of await nodes()) this.labels(n.hostname).set(n.instances);
  });
}
