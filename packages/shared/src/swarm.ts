/**
 * The Docker Swarm vocabulary the deployment (deploy/swarm) and the provisioner's swarm driver share: how a
 * service is pinned to a node, the label that marks a node being drained, and how a swarm object is written.
 */

import { retry } from './retry.ts';

/** The placement constraint that pins a service to one node, and the node it names (undefined: not pinned). */
export const pinTo = (nodeId: string): string => `node.id == ${nodeId}`;
export const pinnedNode = (constraints: string[] | undefined): string | undefined =>
  constraints?.map((c) => /^node\.id\s*==\s*(\S+)$/.exec(c)?.[1]).find(Boolean);

/**
 * A node being emptied of instances (`deploy/swarm/src/cli.ts drain`): it takes no new instance and the
 * provisioner moves its instances off it. It stays active meanwhile, since a node in the swarm's own drain runs
 * no task at all, not even the jobs that copy a volume off it.
 */
export const DRAIN_LABEL = 'agenthost.drain';

/**
 * On the provisioner's one-shot job services (a node's preparation, volume copies and removals, each pinned to a
 * node): the provisioner sweeps those a dead replica left, and `drain` keeps a node active while any is there.
 */
export const JOB_SERVICE_LABEL = 'agenthost.janitor';

/**
 * Read a swarm object (service, node), change it and write it at the version read. The swarm writes its
 * objects itself too (a rolling update's status, a new service's endpoint), so a write that comes out of
 * sequence is read and made again. `change` returning undefined: nothing to write. Resolves false when the
 * object is gone (`read` gave undefined).
 */
export async function writeAtVersion<S>(
  read: () => Promise<{ version: number; spec: S } | undefined>,
  write: (version: number, spec: S) => Promise<unknown>,
  change: (current: S) => S | undefined,
): Promise<boolean> {
  // The provisioner's engine wrapper keeps the engine's own error as the cause.
  const outOfSequence = (err: unknown) => /update out of sequence/.test(`${(err as Error).message} ${(err as { cause?: Error }).cause?.message ?? ''}`);
  return retry(
    async () => {
      const current = await read();
      if (!current) return false;
      const next = change(current.spec);
      if (next !== undefined) await write(current.version, next);
      return true;
    },
    { attempts: 5, delayMs: 0, retryable: outOfSequence },
  );
}

/** What nodeAddr reads of a swarm node (as the engine's node list and inspect give it). */
export interface SwarmNodeAddresses {
  ID?: string;
  Spec?: { Labels?: Record<string, string> };
  ManagerStatus?: { Addr?: string };
  Status?: { Addr?: string };
}

/**
 * The address a node's instances are reached at. The operator's `agenthost.addr` node label wins (a node
 * behind NAT, or with a public address other than its swarm one). Otherwise a manager's advertise address:
 * the engine (20.10) reports a manager's Status.Addr as whichever local address it observed, which on a
 * host with several interfaces is not the one it advertises. A worker's Status.Addr is its advertise address.
 */
export function nodeAddr(n: SwarmNodeAddresses): string {
  const label = n.Spec?.Labels?.['agenthost.addr'];
  if (label) return label;
  const manager = n.ManagerStatus?.Addr;
  if (manager) return manager.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  return n.Status?.Addr ?? '';
}
