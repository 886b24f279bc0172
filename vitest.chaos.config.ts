import { defineConfig } from 'vitest/config';
import { loadInfraEnv } from './packages/testkit/src/infra-env.ts';

// The chaos suite (deploy/chaos): it SIGKILLs the Docker engine among the rest, so it runs alone, after every other
// suite (deploy/test.sh's last phase), on an engine with live-restore. Its deployment brings its own Postgres and NATS.
loadInfraEnv();

export default defineConfig({
  test: {
    include: ['deploy/chaos/**/*.test.ts'],
    testTimeout: 90_000,
    hookTimeout: 600_000,
    pool: 'forks',
    maxWorkers: 1,
    reporters: ['default'],
  },
});
