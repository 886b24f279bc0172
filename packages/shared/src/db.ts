import { CompiledQuery, Kysely, Migrator, PostgresDialect, sql, type Migration } from 'kysely';
import pg from 'pg';
import { pastSpan } from './observe/tracing.ts';

// int8 (bigint) columns come back as JS numbers: our counters and byte sizes stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));

export interface ConnectOptions {
  url: string;
  /** The service's own schema: set as search_path, created if missing, holds its migration table. */
  schema: string;
  /** Static, ordered record of migrations (ISO-timestamp names). */
  migrations: Record<string, Migration>;
  poolSize?: number;
  /** Read only (an operator's tool such as the doctor): the schema must exist and is not migrated. */
  readOnly?: boolean;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Connect to the service's schema and migrate it to latest, or throw. */
export async function connect<DB>(opts: ConnectOptions): Promise<Kysely<DB>> {
  if (!SCHEMA_NAME.test(opts.schema)) throw new Error(`invalid schema name ${opts.schema}`);
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.poolSize ?? 10,
    options: `-c search_path=${opts.schema}`,
    connectionTimeoutMillis: 5000,
  });
  // A client that loses its server must not crash the process: an idle one's error goes to the pool, a checked-out
  // one's to the client itself (its query is rejected, which the caller sees, and the pool drops it on release).
  // Without the second, a Postgres killed mid-query ended the process with an unhandled 'error' event.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  // Each query becomes a span of the request it serves (kysely reports it once it finished, in the caller's
  // async context). Its text has placeholders, never the values.
  const db = new Kysely<DB>({
    dialect: new PostgresDialect({ pool }),
    log: (e) => querySpan(opts.schema, e.query.sql, e.queryDurationMillis / 1000, e.level === 'error' ? e.error : undefined),
  });
  pools.set(db, { pool, schema: opts.schema });
  if (opts.readOnly) return db;
  try {
    // Deploy creates the schema for the service's own role, which may not create schemas itself: only a
    // missing schema is created here (with a role that may, e.g. a single-role development database).
    const exists = await sql<{ found: number }>`select 1 as found from pg_namespace where nspname = ${opts.schema}`.execute(db);
    if (exists.rows.length === 0) await sql`create schema ${sql.id(opts.schema)}`.execute(db);
    const migrator = new Migrator({
      db,
      migrationTableSchema: opts.schema,
      provider: { getMigrations: async () => opts.migrations },
    });
    const { error, results } = await migrator.migrateToLatest();
    const failed = results?.find((r) => r.status === 'Error');
    if (error || failed) {
      throw new Error(`migration of schema ${opts.schema} failed${failed ? ` at ${failed.migrationName}` : ''}`, { cause: error });
    }
  } catch (err) {
    await db.destroy();
    throw err;
  }
  return db;
}

// biome-ignore lint/suspicious/noExplicitAny: keyed by any service's Kysely, whatever its schema type
const pools = new WeakMap<Kysely<any>, { pool: pg.Pool; schema: string }>();

/**
 * Run a hot statement as a named prepared statement: Postgres parses and plans it once per connection instead
 * of on every call, which kysely cannot ask for. For the gateway's served-count write (bench/gateway/prepared.ts,
 * same run, 2026-11-27): 141 µs of Postgres CPU per statement against 294 µs unprepared, and 251 µs against
 * 411 µs of round trip. A Kysely that connect() did not make runs the text through kysely instead.
 */
export async function runPrepared<R, DB = unknown>(db: Kysely<DB>, name: string, text: string, values: unknown[]): Promise<R[]> {
  const made = pools.get(db);
  if (!made) return (await db.executeQuery<R>(CompiledQuery.raw(text, values))).rows;
  const started = performance.now();
  let failed: unknown;
  try {
    return (await made.pool.query<R & pg.QueryResultRow>({ name, text, values })).rows;
  } catch (err) {
    failed = err;
    throw err;
  } finally {
    querySpan(made.schema, text, (performance.now() - started) / 1000, failed);
  }
}

/** A finished query as a span of the request it served (its text has placeholders, never the values). */
function querySpan(schema: string, text: string, seconds: number, err: unknown): void {
  pastSpan(`pg ${verb(text)}`, { 'db.system.name': 'postgresql', 'db.namespace': schema, 'db.query.text': text }, seconds, err);
}

/** The statement's first word (select, insert, with...): the span's name. */
const verb = (text: string): string => (/^\s*(\w+)/.exec(text)?.[1] ?? 'query').toLowerCase();

/** True for Postgres unique-violation errors (used to turn races into clear 409s or retries). */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string } | undefined;
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}
