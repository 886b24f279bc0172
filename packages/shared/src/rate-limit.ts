import { CompiledQuery, type Kysely } from 'kysely';

/**
 * The store options of a rate-limiter-flexible `RateLimiterPostgres` that counts in `tableName`, a table of the
 * service's own schema, through the service's own Kysely pool: every replica of the service reads and writes the
 * same counters, so a limit holds across replicas and restarts. Spread into the limiter's options beside keyPrefix,
 * points and duration. The table is made by the service's migration in the library's layout (key varchar(255)
 * primary key, points integer not null default 0, expire bigint, in ms since the epoch; an index on expire), not by
 * the library at run time, so the schema stays where every other table's is. The library itself is each service's
 * own dependency; this module names none of its types, so shared does not depend on it.
 */
// biome-ignore lint/suspicious/noExplicitAny: any service's Kysely, whatever its schema type
export function postgresLimiterStore(db: Kysely<any>, tableName: string) {
  return {
    // The library speaks to a pg client's query(); rowCount is how pg reports rows, which its get() and delete() read.
    storeClient: {
      query: async (q: { text: string; values?: unknown[] }) => {
        const r = await db.executeQuery(CompiledQuery.raw(q.text, q.values ?? []));
        return { rows: r.rows, rowCount: Number(r.numAffectedRows ?? r.rows.length) };
      },
    },
    storeType: 'pool',
    tableName,
    tableCreated: true,
    // Rows expired an hour ago go every 5 minutes (a timer that keeps no process alive).
    clearExpiredByTimeout: true,
  };
}

/** A limiter's answer (RateLimiterRes) as the whole seconds of a 429's Retry-After: at least 1. */
export const retryAfterSeconds = (res: { msBeforeNext: number }): number => Math.max(1, Math.ceil(res.msBeforeNext / 1000));
