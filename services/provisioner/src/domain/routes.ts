import type { Kysely } from 'kysely';
import type { contracts } from '@agenthost/shared';
import type { ProvisionerDB } from '../db/schema.ts';
import type { InstanceRuntime } from './runtime.ts';

type Route = contracts.provisioner.Route;

/** An instance's public URL from INSTANCE_URL_TEMPLATE ({port}, {id}, {host}: its node's address, localhost on one engine). */
export const instanceUrl = (template: string, row: { id: string; port: number; node_host: string | null }): string =>
  template
    .replaceAll('{port}', String(row.port))
    .replaceAll('{id}', row.id)
    .replaceAll('{host}', row.node_host ?? 'localhost');

/**
 * The edge's route table (provisioner.v1.routes.list): every instance that is not being deleted, with the
 * address its agent answers on from the edge's host (the same address readiness probes) and its status. The
 * edge answers for a provisioning, stopped or failed instance itself and proxies to a running one.
 */
export async function listRoutes(
  deps: { db: Kysely<ProvisionerDB>; runtime: Pick<InstanceRuntime, 'probeHost'> },
  input: { instance_id?: string | undefined },
): Promise<{ routes: Route[] }> {
  let q = deps.db.selectFrom('instances').select(['id', 'status', 'port', 'node_host']).where('deleting_at', 'is', null);
  if (input.instance_id) q = q.where('id', '=', input.instance_id);
  const rows = await q.orderBy('id').execute();
  return {
    routes: rows.map((r) => {
      const host = deps.runtime.probeHost(r);
      return { instance_id: r.id, status: r.status, upstream: `${host.includes(':') ? `[${host}]` : host}:${r.port}` };
    }),
  };
}
