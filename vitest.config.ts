import { defineConfig } from 'vitest/config';
import { loadInfraEnv } from './packages/testkit/src/infra-env.ts';

// deploy/infra.sh writes the URLs of the servers it started; tests use them unless already set.
loadInfraEnv();

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'services/*/test/**/*.test.ts', 'deploy/test/**/*.test.ts', 'deploy/swarm/test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: Number(process.env.TEST_WORKERS ?? 2),
    reporters: ['default'],
  },
});
