import { contracts, endpoint, type Endpoint } from '@agenthost/shared';
import type { ProvisionerContext } from './context.ts';
import { listRoutes } from './domain/routes.ts';

const P = contracts.provisioner;
const D = contracts.devices;

/**
 * Every subject the provisioner serves, and the domain call that answers it: one line per contract
 * (packages/shared/src/contracts/provisioner.ts, devices.ts). The subject's schemas are checked by endpoint().
 */
export function endpoints(ctx: ProvisionerContext): Endpoint[] {
  const { creator, view, lifecycle, upgrades, sleeper, backups, idleSleep, devices, repo, runtime } = ctx;
  return [
    endpoint(P.create, (input) => creator.create(input)),
    endpoint(P.get, (input) => view.get(input)),
    endpoint(P.list, (input) => view.list(input)),
    endpoint(P.restart, (input) => lifecycle.restart(input)),
    endpoint(P.start, (input) => lifecycle.start(input)),
    endpoint(P.stop, (input) => lifecycle.stop(input)),
    endpoint(P.remove, (input) => lifecycle.remove(input)),
    endpoint(P.upgrade, (input) => upgrades.upgrade(input)),
    endpoint(P.logs, (input) => view.logs(input)),
    endpoint(P.logsPage, (input) => view.logsPage(input)),
    endpoint(P.usage, (input) => view.usage(input)),
    endpoint(P.backup, (input) => backups.create(input)),
    endpoint(P.backups, (input) => backups.list(input)),
    endpoint(P.restore, (input) => backups.restore(input)),
    endpoint(P.clone, (input) => backups.clone(input)),
    endpoint(P.removeBackup, (input) => backups.remove(input)),
    endpoint(P.routes, (input) => listRoutes({ repo, runtime }, input)),
    endpoint(P.activity, async (input) => ({ recorded: await idleSleep.record(input.instance_ids) })),
    endpoint(P.wake, (input) => sleeper.wake(input.instance_id)),
    endpoint(D.list, (input) => devices.list(input)),
    endpoint(D.decide, (input) => devices.decide(input)),
  ];
}
