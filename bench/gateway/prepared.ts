// The gateway's served-count write (domain/quota/served.ts) sent as kysely sends a raw statement (parsed and
// planned by Postgres on every call) against the same text as a named prepared statement (shared/db.ts
// runPrepared), alternating rounds on one database in this run: Postgres CPU (every postgres process, from
// /proc) and round trip per statement. Usage: node bench/gateway/prepared.ts (after deploy/infra.sh; BENCH_STATEMENTS,
// default 3000 per round); writes bench/results/gateway-prepared.json.

import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuSecondsOf } from './processes.ts';
import { loadInfraEnv } from '../../packages/testkit/src/infra-env.ts';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
loadInfraEnv();
const { createDatabase } = await import('../../packages/testkit/src/index.ts');
const { connect, runPrepared } = await import('../../packages/shared/src/index.ts');
// bench/ is not a workspace package: the shared package's kysely.
const { CompiledQuery } = createRequire(path.join(repo, 'packages/shared/package.json'))('kysely') as {
  CompiledQuery: { raw(sql: string, parameters: unknown[]): never };
};
const { migrations } = await import('../../services/gateway/src/db/migrations/index.ts');
const { SERVED_SQL } = await import('../../services/gateway/src/domain/quota/served.ts');

const N = Number(process.env.BENCH_STATEMENTS ?? 3000);
const database = await createDatabase('prepared');
const db = await connect<unknown>({ url: database.url, schema: 'gateway', migrations, poolSize: 1 });
try {
  const replica = randomUUID();
  const user = randomUUID();
  const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000).toISOString();
  const day = new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000).toISOString();
  await db.executeQuery(
    CompiledQuery.raw(
      `insert into usage_leases (replica_id, user_id, "window", window_start, granted, served)
       values ($1, $2, 'minute', $3, 1000000000, 0), ($1, $2, 'day', $4, 1000000000, 0)`,
      [replica, user, minute, day],
    ),
  );
  let served = 0;
  const values = () => [[user, user], ['minute', 'day'], [minute, day], [++served, served], replica];
  const ways = {
    unprepared: () => db.executeQuery(CompiledQuery.raw(SERVED_SQL, values())),
    prepared: () => runPrepared(db, 'usage-served', SERVED_SQL, values()),
  };
  const spent = { unprepared: { cpu: 0, wall: 0 }, prepared: { cpu: 0, wall: 0 } };
  for (let round = 0; round < 6; round++) {
    for (const [name, run] of Object.entries(ways) as [keyof typeof ways, () => Promise<unknown>][]) {
      const c0 = cpuSecondsOf('postgres');
      const t0 = performance.now();
      for (let i = 0; i < N; i++) await run();
      // The first round warms both (the connection, the plan cache): not counted.
      if (round === 0) continue;
      spent[name].wall += (performance.now() - t0) / 1000;
      spent[name].cpu += cpuSecondsOf('postgres') - c0;
    }
  }
  const per = (s: { cpu: number; wall: number }) => ({
    postgres_cpu_us: Math.round((s.cpu / (5 * N)) * 1e6),
    round_trip_us: Math.round((s.wall / (5 * N)) * 1e6),
  });
  const out = { statements_per_round: N, rounds: 5, unprepared: per(spent.unprepared), prepared: per(spent.prepared) };
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  mkdirSync(path.join(repo, 'bench/results'), { recursive: true });
  writeFileSync(
    path.join(repo, 'bench/results/gateway-prepared.json'),
    `${JSON.stringify({ benchmark: "gateway served-count write: kysely's raw statement against a named prepared statement", when: new Date().toISOString(), ...out }, null, 2)}\n`,
  );
} finally {
  await db.destroy();
  await database.drop();
}
process.exit(0);
