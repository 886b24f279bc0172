import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../packages/testkit/src/index.ts';

// The operator's Prometheus assets (deploy/observability): the rules and the config are what promtool
// accepts, the alerts fire on the series of a crash loop, a lost NATS connection, a node down, failing quota
// leases and an expiring certificate (alerts.test.yml), and the dashboard only asks for metrics we export.

const exec = promisify(execFile);
const dir = path.join(repoRoot, 'deploy/observability');

describe('deploy/observability', () => {
  it('promtool checks the alert rules and the scrape configurations (single host, swarm)', async () => {
    const rules = await exec('promtool', ['check', 'rules', path.join(dir, 'alerts.yml')]);
    expect(rules.stdout).toMatch(/SUCCESS: \d+ rules found/);
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'agenthost-promcfg-'));
    try {
      cpSync(dir, tmp, { recursive: true });
      for (const file of ['prometheus.yml', 'prometheus-swarm.yml']) {
        const config = await exec('promtool', ['check', 'config', path.join(tmp, file)]);
        expect(config.stdout, file).toContain('is valid prometheus config file syntax');
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('the alerts fire on the series an operator would see', async () => {
    const { stdout } = await exec('promtool', ['test', 'rules', path.join(dir, 'alerts.test.yml')], { cwd: dir });
    expect(stdout).toContain('SUCCESS');
  });

  it('the dashboard queries only metrics the services export', () => {
    const dashboard = JSON.parse(readFileSync(path.join(dir, 'grafana-dashboard.json'), 'utf8')) as { panels: { targets: { expr: string }[] }[] };
    const exported = new Set<string>();
    for (const file of [
      'packages/shared/src/observe/metrics.ts',
      'packages/shared/src/observe/index.ts',
      'services/gateway/src/http/observe.ts',
      'services/gateway/src/domain/metrics.ts',
      'services/provisioner/src/metrics.ts',
      'services/billing-chain/src/metrics.ts',
      'services/keyvault/src/metrics.ts',
    ]) {
      for (const m of readFileSync(path.join(repoRoot, file), 'utf8').matchAll(/'(agenthost_[a-z_]+)'/g)) exported.add(m[1]!);
    }
    const defaults = /^agenthost_(process|nodejs)_/; // prom-client's process metrics under our prefix
    const asked = dashboard.panels.flatMap((p) =>
      p.targets.flatMap((t) => [...t.expr.matchAll(/\b(agenthost_[a-z_]+?)(_bucket|_sum|_count)?\b/g)].map((m) => m[1]!)),
    );
    expect(asked.length).toBeGreaterThan(10);
    for (const name of asked) expect(exported.has(name) || defaults.test(name), name).toBe(true);
  });
});
