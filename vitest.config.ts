import { existsSync, readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

// deploy/infra.sh writes the URLs of the servers it started; tests use them unless already set.
const infraEnv = `${process.env.AGENTHOST_STATE ?? '/var/lib/agenthost'}/infra.env`;
if (existsSync(infraEnv)) {
  for (const line of readFileSync(infraEnv, 'utf8').split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line);
    if (m && process.env[m[1]!] === undefined) process.env[m[1]!] = m[2]!;
  }
}

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'services/*/test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: Number(process.env.TEST_WORKERS ?? 2),
    reporters: ['default'],
  },
});
