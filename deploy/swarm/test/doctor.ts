import { execFile } from 'node:child_process';
import path from 'node:path';
import { expect } from 'vitest';
import { repoRoot } from '../../../packages/testkit/src/index.ts';
import { manager } from './helpers.ts';

interface Report {
  ok: boolean;
  instances: number;
  drift: Array<{ instance_id?: string; check: string; problem: string; fix: string }>;
}

/** `cli.ts doctor --json` as an operator runs it on the manager: its exit code and report. */
export function doctor(): Promise<{ code: number; report: Report }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [path.join(repoRoot, 'deploy/swarm/src/cli.ts'), 'doctor', '--json'], { timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err ? Number((err as { code?: number }).code ?? -1) : 0;
      try {
        resolve({ code, report: JSON.parse(stdout) as Report });
      } catch {
        reject(new Error(`doctor exited ${code} without a report: ${stderr}`));
      }
    });
  });
}

/** Sets (value) or removes (undefined) one label of a service or node, at its current version. */
async function relabel(target: { inspect(): Promise<any>; update(o: any): Promise<any> }, key: string, value: string | undefined) {
  const info = await target.inspect();
  const labels = { ...info.Spec.Labels };
  if (value === undefined) delete labels[key];
  else labels[key] = value;
  await target.update({ version: info.Version.Index, ...info.Spec, Labels: labels });
}

/**
 * The doctor audits the running swarm: no drift; then three changes made behind the provisioner's back (a label on an
 * instance's service, a service of no instance, a node's preparation label removed) are each reported with their fix,
 * and once undone the audit is clean again. None of the changes restarts a task. The provisioners may undo one of them
 * on their own meanwhile (they remove a service of no instance), which the check allows.
 */
export async function doctorSeesDrift(instanceId: string, worker: string): Promise<void> {
  const clean = await doctor();
  expect(clean.report.drift, JSON.stringify(clean.report)).toEqual([]);
  expect([clean.code, clean.report.ok, clean.report.instances >= 5]).toEqual([0, true, true]);

  const service = manager.getService(`agenthost-${instanceId}`);
  const spec = (await service.inspect()).Spec;
  const ghost = 'inst-00000000000000000d0c';
  const node = (await manager.listNodes()).find((n) => n.Status?.Addr === worker || n.Spec?.Labels?.['agenthost.addr'] === worker)!;
  const nodeLabel = Object.keys(node.Spec?.Labels ?? {}).find((k) => k.startsWith('agenthost.network.'))!;
  const prepared = node.Spec!.Labels![nodeLabel];
  await relabel(service, 'agenthost.added-by-hand', 'yes');
  await manager.createService({
    Name: `agenthost-${ghost}`,
    Labels: { 'agenthost.instance': ghost, 'agenthost.scope': spec.Labels['agenthost.scope'] },
    TaskTemplate: { ContainerSpec: { Image: spec.TaskTemplate.ContainerSpec.Image } },
    Mode: { Replicated: { Replicas: 0 } },
  });
  const ghostService = manager.getService(`agenthost-${ghost}`);
  await relabel(manager.getNode(node.ID!), nodeLabel, undefined);
  try {
    const drifted = await doctor();
    expect(drifted.code).toBe(1);
    // The provisioners' reconcilers sweep such a service too (every 30 s): once it is gone, the doctor may have run
    // before or after. Still there after the doctor, it was there during it, and must have been reported.
    const ghostLeft = await ghostService.inspect().then(
      () => true,
      () => false,
    );
    const orphan = drifted.report.drift.find((f) => f.instance_id === ghost && f.check === 'orphan');
    if (ghostLeft) expect(orphan?.fix, JSON.stringify(drifted.report)).toBe(`docker service rm agenthost-${ghost}`);
    const found = drifted.report.drift.filter((f) => f !== orphan).map((f) => [f.instance_id ?? '', f.check]);
    expect(found.sort(), JSON.stringify(drifted.report)).toEqual([
      ['', 'node'],
      [instanceId, 'labels'],
    ]);
  } finally {
    await relabel(service, 'agenthost.added-by-hand', undefined);
    await ghostService.remove().catch((err: { statusCode?: number }) => {
      if (err.statusCode !== 404) throw err; // swept by a provisioner meanwhile
    });
    await relabel(manager.getNode(node.ID!), nodeLabel, prepared);
  }
  const again = await doctor();
  expect([again.code, again.report.drift]).toEqual([0, []]);
}
