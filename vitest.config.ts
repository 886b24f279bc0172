import { configDefaults, defineConfig } from 'vitest/config';
import { loadInfraEnv } from './packages/testkit/src/infra-env.ts';

// deploy/infra.sh writes the URLs of the servers it started (the Docker engine's, and the Postgres that
// deploy/start.sh's own stack uses). The tests' Postgres and NATS are containers (packages/testkit/src/containers.ts).
loadInfraEnv();

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'services/*/test/**/*.test.ts', 'deploy/test/**/*.test.ts', 'deploy/swarm/test/**/*.test.ts'],
    // The two-node swarm runs alone after these (vitest.swarm.config.ts); its unit-sized neighbours stay here.
    exclude: [...configDefaults.exclude, 'deploy/swarm/test/swarm.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ['packages/testkit/src/global-setup.ts'],
    pool: 'forks',
    maxWorkers: Number(process.env.TEST_WORKERS ?? 2),
    reporters: ['default'],
  },
});
