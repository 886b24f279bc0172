import { sql, type Kysely } from 'kysely';

// Self-healing: the provisioner restarts a crashed agent itself, with exponential backoff, and the row says how
// often it crashed, why last and when the next restart is due (durable, so any replica resumes a pending one).
// The status outbox carries the crash with its event: a crash turns the instance provisioning (a new generation)
// or failed, so the trigger already writes an event; it now also copies the exit reason, the restarts and the
// next restart of a crash (step 'backoff').
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('instances')
    .addColumn('restarts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('crash_streak', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_exit_reason', 'text')
    .addColumn('last_exit_at', 'timestamptz')
    .addColumn('next_restart_at', 'timestamptz')
    .execute();
  await db.schema
    .alterTable('status_events')
    .addColumn('restarts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('exit_reason', 'text')
    .addColumn('next_restart_at', 'timestamptz')
    .execute();
  await noteStatusChange(db, true);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await noteStatusChange(db, false);
  await db.schema.alterTable('status_events').dropColumn('restarts').dropColumn('exit_reason').dropColumn('next_restart_at').execute();
  await db.schema
    .alterTable('instances')
    .dropColumn('restarts')
    .dropColumn('crash_streak')
    .dropColumn('last_exit_reason')
    .dropColumn('last_exit_at')
    .dropColumn('next_restart_at')
    .execute();
}

/** The status outbox's trigger function (2026-11-23T18-00-00-status-outbox), with or without the crash fields. */
async function noteStatusChange(db: Kysely<unknown>, crashes: boolean): Promise<void> {
  const insert = crashes
    ? sql`insert into status_events (instance_id, user_id, status, failure_reason, generation, restarts, exit_reason, next_restart_at)
          values (new.id, new.user_id, new.status, case when new.status = 'failed' then new.failure_reason end, new.generation, new.restarts,
                  case when new.step = 'backoff' then new.last_exit_reason end, case when new.step = 'backoff' then new.next_restart_at end);`
    : sql`insert into status_events (instance_id, user_id, status, failure_reason, generation)
          values (new.id, new.user_id, new.status, case when new.status = 'failed' then new.failure_reason end, new.generation);`;
  await sql`
    create or replace function note_status_change() returns trigger
    language plpgsql
    set search_path from current
    as $$
    begin
      -- A new status; a new failure reason; or a new generation starting again (restart while provisioning).
      if tg_op = 'INSERT'
        or new.status is distinct from old.status
        or (new.status = 'failed' and new.failure_reason is distinct from old.failure_reason)
        or (new.status = 'provisioning' and new.generation <> old.generation) then
        ${insert}
        perform pg_notify('instance_status_events', '');
      end if;
      return null;
    end $$`.execute(db);
}
