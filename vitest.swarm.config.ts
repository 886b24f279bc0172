import { defineConfig } from 'vitest/config';
import { loadInfraEnv } from './packages/testkit/src/infra-env.ts';

// The swarm suite (deploy/swarm/test/swarm.test.ts): a two-node platform, ~15 tasks on two engines. It runs alone, after
// the other suites (deploy/test.sh): beside them, on 2 cores, the load reached 20-45 and every suite's answers came
// late (503s after the request timeout, here and in whatever ran next to it). It brings its own Postgres and NATS.
loadInfraEnv();

export default defineConfig({
  test: {
    include: ['deploy/swarm/test/swarm.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 1,
    reporters: ['default'],
  },
});
