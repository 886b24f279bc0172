import { removeOrphanContainers, startPostgres } from './containers.ts';

/**
 * Vitest's global setup: one Postgres container for the run (every suite makes its own database in it, so
 * suites run in parallel without seeing each other's rows). Its URL reaches the test processes through
 * TEST_DATABASE_URL, set before vitest starts them.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const orphans = await removeOrphanContainers();
  if (orphans) console.log(`removed ${orphans} test container(s) left by a run that was killed`);
  const pg = await startPostgres();
  process.env.TEST_DATABASE_URL = pg.url;
  return () => pg.stop();
}
