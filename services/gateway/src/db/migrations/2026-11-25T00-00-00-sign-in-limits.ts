import { sql, type Kysely } from 'kysely';

// The counters of the sign-in limits (nonces and logins per client address and per wallet), shared by every
// gateway replica. The layout is rate-limiter-flexible's RateLimiterPostgres table (created here, not by the
// library at run time); expire is in ms since the epoch.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('sign_in_limits')
    .addColumn('key', 'varchar(255)', (c) => c.primaryKey())
    .addColumn('points', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('expire', 'bigint')
    .execute();
  await sql`create index sign_in_limits_expire on sign_in_limits (expire)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('sign_in_limits').execute();
}
