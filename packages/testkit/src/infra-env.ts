import { existsSync, readFileSync } from 'node:fs';

/**
 * Load the URLs of the servers deploy/infra.sh started ($AGENTHOST_STATE/infra.env) into process.env,
 * keeping anything already set. Tests, benchmarks and vitest's config call it before importing code that
 * reads TEST_DATABASE_URL. Dependency-free, so it can be imported before everything else.
 */
export function loadInfraEnv(): void {
  const file = `${process.env.AGENTHOST_STATE ?? '/var/lib/agenthost'}/infra.env`;
  if (!existsSync(file)) return;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line);
    if (m && process.env[m[1]!] === undefined) process.env[m[1]!] = m[2]!;
  }
}
