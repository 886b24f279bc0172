import type { contracts } from '@agenthost/shared';
import type { Step } from '../db/schema.ts';
import type { InstanceReads } from './instance-reads.ts';
import type { InstanceRuntime } from './runtime.ts';

type Route = contracts.provisioner.Route;

/** An instance's public URL from INSTANCE_URL_TEMPLATE ({port}, {id}, {host}: its node's address, localhost on one engine). */
export const instanceUrl = (template: string, row: { id: string; port: number; node_host: string | null }): string =>
  template
    .replaceAll('{port}', String(row.port))
    .replaceAll('{id}', row.id)
    .replaceAll('{host}', row.node_host ?? 'localhost');

/** The status an instance is stopping to, by its step. */
const STOPPING_TO: Partial<Record<Step, Route['status']>> = { sleeping: 'sleeping', stopping: 'stopped' };

/**
 * The edge's route table (provisioner.v1.routes.list): every instance that is not being deleted, with the
 * address its agent answers on from the edge's host (the same address readiness probes) and its status. The
 * edge answers for a provisioning, stopped or failed instance itself and proxies to a running one. With the hash of
 * its access token (hashToken): the edge recognises its owner's requests by it. An instance whose
 * container is being stopped is reported as what it becomes: its row says running until the stop is done, but its
 * agent may no longer answer, and the edge asks again when it could not reach one (a sleeping route is held and woken).
 */
export async function listRoutes(
  deps: { repo: Pick<InstanceReads, 'routes'>; runtime: Pick<InstanceRuntime, 'probeHost'> },
  input: { instance_id?: string | undefined },
): Promise<{ routes: Route[] }> {
  const rows = await deps.repo.routes(input.instance_id);
  return {
    routes: rows.map((r) => {
      const host = deps.runtime.probeHost(r);
      const upstream = `${host.includes(':') ? `[${host}]` : host}:${r.port}`;
      return { instance_id: r.id, status: STOPPING_TO[r.step] ?? r.status, upstream, token_sha256: r.access_token_hash };
    }),
  };
}
