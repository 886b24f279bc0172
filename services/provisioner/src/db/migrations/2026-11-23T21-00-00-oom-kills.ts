import { sql, type Kysely } from 'kysely';

// OOM kills, countable: the row keeps how often the kernel killed the agent for its memory limit and what kind
// of exit the last one was ('oom_killed', 'signal', 'exit'), and the status outbox copies that kind into the
// crash's event, so GET /instance/status and the lifecycle events say it without parsing the reason's words.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('instances')
    .addColumn('oom_kills', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_exit_kind', 'text')
    .execute();
  await db.schema.alterTable('status_events').addColumn('exit_kind', 'text').execute();
  await noteStatusChange(db, true);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await noteStatusChange(db, false);
  await db.schema.alterTable('status_events').dropColumn('exit_kind').execute();
  await db.schema.alterTable('instances').dropColumn('oom_kills').dropColumn('last_exit_kind').execute();
}

/** The status outbox's trigger function (as 2026-11-23T19-00-00-self-healing left it), with or without the exit kind. */
async function noteStatusChange(db: Kysely<unknown>, kind: boolean): Promise<void> {
  const insert = kind
    ? sql`insert into status_events (instance_id, user_id, status, failure_reason, generation, restarts, exit_reason, exit_kind, next_restart_at)
          values (new.id, new.user_id, new.status, case when new.status = 'failed' then new.failure_reason end, new.generation, new.restarts,
                  case when new.step = 'backoff' then new.last_exit_reason end, case when new.step = 'backoff' then new.last_exit_kind end,
                  case when new.step = 'backoff' then new.next_restart_at end);`
    : sql`insert into status_events (instance_id, user_id, status, failure_reason, generation, restarts, exit_reason, next_restart_at)
          values (new.id, new.user_id, new.status, case when new.status = 'failed' then new.failure_reason end, new.generation, new.restarts,
                  case when new.step = 'backoff' then new.last_exit_reason end, case when new.step = 'backoff' then new.next_restart_at end);`;
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
