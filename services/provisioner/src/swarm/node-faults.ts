// What a task's refusal says about its node, for the faults a node's crash leaves behind (docs/deploy/swarm.md, "A
// node that crashes"). The swarm retries a refused task every second without end (restart policy: no attempt limit),
// so these are repaired, or reported, while its task keeps being retried: none of them is the agent's failure.

/**
 * - `unprepared`: the node has lost the config-only network its instance bridge is made from. Its engine started
 *   with an empty network store (node-engine.sh sets a crashed engine's store aside) or someone pruned it: the
 *   provisioner prepares the node again.
 * - `stale-network`: the node's engine crashed and came back with the instance bridge and its endpoints (host ports
 *   included) still in its network store, which the swarm does not know (moby#37087). Only a restart of that engine
 *   with its store set aside clears it: an operator's step, named in the instance's failure and by the doctor.
 */
export type NodeFault = 'unprepared' | 'stale-network';

export function nodeFault(taskError: string): NodeFault | undefined {
  if (/^configuration network ".+" does not exist/.test(taskError)) return 'unprepared';
  if (/^network \S+ exists$/.test(taskError)) return 'stale-network';
  return undefined;
}

/** The reason an instance shows while its node keeps stale network state. */
export const staleNetworkReason = (node: string): string =>
  `Its node (${node}) crashed and its Docker engine came back with stale network state; an operator must restart that engine with its network store set aside (docs/deploy/swarm.md, "A node that crashes")`;

/** The error of the most recently refused or failed task among `tasks` ('' when none has one). */
export function newestRefusal(tasks: Array<{ UpdatedAt?: string; Status?: { Err?: string } }>): string {
  let newest = { at: -1, err: '' };
  for (const t of tasks) {
    const at = Date.parse(t.UpdatedAt ?? '');
    if (t.Status?.Err && at > newest.at) newest = { at, err: t.Status.Err };
  }
  return newest.err;
}

/**
 * Whether the newest `times` refused tasks all say the node keeps stale network state. One such refusal is not yet the
 * node's fault: the swarm tries again each second, and only a refusal that every try repeats needs the operator.
 */
export function staleNetworkRepeated(tasks: Array<{ UpdatedAt?: string; Status?: { Err?: string } }>, times = 3): boolean {
  const refused = tasks.filter((t) => t.Status?.Err).sort((a, b) => Date.parse(b.UpdatedAt ?? '') - Date.parse(a.UpdatedAt ?? ''));
  return refused.length >= times && refused.slice(0, times).every((t) => nodeFault(t.Status!.Err!) === 'stale-network');
}
