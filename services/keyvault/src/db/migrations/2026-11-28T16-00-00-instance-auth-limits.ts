import { sql, type Kysely } from 'kysely';

// Failed instance authentications are counted by rate-limiter-flexible (RateLimiterPostgres, as the gateway's
// sign-in limits are) instead of keyvault's own fixed-window code, in its table layout (created here, not by the
// library at run time); expire is in ms since the epoch. The old table `auth_failures` stays for now: replicas of
// the previous release still write it during a rolling update (a later migration drops it). Its counts are not
// carried over: at most one window's failures, counted afresh.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('instance_auth_limits')
    .addColumn('key', 'varchar(255)', (c) => c.primaryKey())
    .addColumn('points', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('expire', 'bigint')
    .execute();
  await sql`create index instance_auth_limits_expire on instance_auth_limits (expire)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('instance_auth_limits').execute();
}
