import { sql, type Kysely } from 'kysely';

/**
 * Every change of an instance's status is written, in the same transaction as the change, to status_events:
 * an outbox that the status relay publishes to JetStream (events.instance.status) in order and then empties.
 * A trigger rather than a call at each place that changes a status: no transition can be missed (readiness,
 * stop, start, restart, node faults, quota, moves, the reconciler), and a crash between the change and the
 * publish loses nothing.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table status_events (
      seq bigserial primary key,
      instance_id text not null,
      user_id uuid not null,
      status text not null,
      failure_reason text,
      generation int not null,
      at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create function note_status_change() returns trigger
    language plpgsql
    set search_path from current
    as $$
    begin
      -- A new status; a new failure reason; or a new generation starting again (restart while provisioning).
      if tg_op = 'INSERT'
        or new.status is distinct from old.status
        or (new.status = 'failed' and new.failure_reason is distinct from old.failure_reason)
        or (new.status = 'provisioning' and new.generation <> old.generation) then
        insert into status_events (instance_id, user_id, status, failure_reason, generation)
        values (new.id, new.user_id, new.status, case when new.status = 'failed' then new.failure_reason end, new.generation);
        perform pg_notify('instance_status_events', '');
      end if;
      return null;
    end $$`.execute(db);
  await sql`create trigger instances_status_events after insert or update on instances for each row execute function note_status_change()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger instances_status_events on instances`.execute(db);
  await sql`drop function note_status_change()`.execute(db);
  await sql`drop table status_events`.execute(db);
}
