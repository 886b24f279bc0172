#!/usr/bin/env node
import { connect, createLogger, loadConfig } from '@agenthost/shared';
import { provisionerConfig } from '../config.ts';
import type { ProvisionerDB } from '../db/schema.ts';
import { migrations } from '../db/migrations/index.ts';
import { DockerEngine } from '../docker/engine.ts';
import { InstanceReads } from '../domain/instance-reads.ts';
import { audit } from './audit.ts';
import type { DoctorReport } from './checks.ts';
import { processFindings } from './processes.ts';

/**
 * `agenthost doctor [--json]`: audits one provisioner's instances (its configuration: the environment the
 * provisioner runs with, which bin/agenthost loads through deploy/run-service.sh). Exit 0: no drift; 1: drift, each
 * finding naming the instance and the fix; 2: the audit could not run.
 */
const json = process.argv.includes('--json');
const config = loadConfig(provisionerConfig);
const engine = new DockerEngine({ host: config.DOCKER_HOST, timeoutMs: config.DOCKER_TIMEOUT_MS, log: createLogger('doctor', 'silent') });

// First, and whatever else fails: a Postgres or engine in a crash loop is why the audit itself cannot run.
const processes = await processFindings(process.env.AGENTHOST_SUPERVISOR_CONF);
try {
  const db = await connect<ProvisionerDB>({ url: config.DATABASE_URL, schema: 'provisioner', migrations, poolSize: 2, readOnly: true });
  try {
    const audited = await audit({ config, instances: new InstanceReads(db), docker: engine.docker });
    const drift = [...processes.drift, ...audited.drift];
    const report: DoctorReport = { ...audited, ok: drift.length === 0, drift, notes: [...processes.notes, ...audited.notes] };
    process.stdout.write(json ? `${JSON.stringify(report, null, 2)}\n` : text(report));
    process.exitCode = report.ok ? 0 : 1;
  } finally {
    await db.destroy();
  }
} catch (err) {
  process.stderr.write(`agenthost doctor: cannot audit: ${(err as Error).message}\n`);
  for (const f of processes.drift) process.stderr.write(`DRIFT (stack) ${f.check}: ${f.problem}\n      fix: ${f.fix}\n`);
  process.exitCode = 2;
}

function text(r: DoctorReport): string {
  const lines = [`agenthost doctor: scope ${r.scope}, ${r.instances} instance(s)`];
  for (const f of r.drift) lines.push(`DRIFT ${f.instance_id ?? '(stack)'} ${f.check}: ${f.problem}`, `      fix: ${f.fix}`);
  for (const f of r.notes) lines.push(`note  ${f.instance_id ?? '(stack)'} ${f.check}: ${f.problem}`);
  lines.push(r.ok ? 'ok: no drift' : `${r.drift.length} drift(s) found`);
  return `${lines.join('\n')}\n`;
}
