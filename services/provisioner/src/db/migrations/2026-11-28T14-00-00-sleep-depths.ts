import { sql, type Kysely } from 'kysely';

// Two sleep depths (docs/decisions/0052-two-sleep-depths.md). A sleeping instance records how deeply it sleeps
// (frozen, swapped or stopped); rows that slept before this migration had their container stopped. wake_warning is
// set by a wake that could not resume a paused agent and booted it instead. The status outbox carries both, and a
// sleeping instance's change of depth is an event too: note_status_change is restated whole (as
// 2026-11-27T10-00-00-image-pinning left it, plus these).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('instances').addColumn('sleep_depth', 'text').addColumn('wake_warning', 'text').execute();
  await sql`alter table instances add constraint instances_sleep_depth_check check (sleep_depth in ('frozen', 'swapped', 'stopped'))`.execute(db);
  await sql`update instances set sleep_depth = 'stopped' where status = 'sleeping'`.execute(db);
  await db.schema.alterTable('status_events').addColumn('sleep_depth', 'text').addColumn('wake_warning', 'text').execute();
  await noteStatusChange(db, true);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await noteStatusChange(db, false);
  await db.schema.alterTable('status_events').dropColumn('sleep_depth').dropColumn('wake_warning').execute();
  await db.schema.alterTable('instances').dropColumn('sleep_depth').dropColumn('wake_warning').execute();
}

async function noteStatusChange(db: Kysely<unknown>, depths: boolean): Promise<void> {
  const columns = depths ? sql`, sleep_depth, wake_warning` : sql``;
  // A sleeping instance whose depth changes (frozen → swapped, or to stopped) says so.
  const depthChanged = depths ? sql`or (tg_op = 'UPDATE' and new.status = 'sleeping' and new.sleep_depth is distinct from old.sleep_depth)` : sql``;
  const values = depths
    ? sql`, case when new.status = 'sleeping' then new.sleep_depth end, case when new.status = 'provisioning' then new.wake_warning end`
    : sql``;
  await sql`
    create or replace function note_status_change() returns trigger
    language plpgsql
    set search_path from current
    as $$
    begin
      -- A new status; a new failure reason; a new generation starting again (restart while provisioning); an upgrade's progress.
      if tg_op = 'INSERT'
        or new.status is distinct from old.status
        or (new.status = 'failed' and new.failure_reason is distinct from old.failure_reason)
        or (new.status = 'provisioning' and new.generation <> old.generation)
        or (tg_op = 'UPDATE' and new.upgrade_state is distinct from old.upgrade_state)
        ${depthChanged} then
        insert into status_events (instance_id, user_id, status, failure_reason, generation, restarts, exit_reason, exit_kind, next_restart_at,
                                   upgrade, upgrade_reason ${columns})
        values (new.id, new.user_id, new.status, case when new.status = 'failed' then new.failure_reason end, new.generation, new.restarts,
                case when new.step = 'backoff' then new.last_exit_reason end, case when new.step = 'backoff' then new.last_exit_kind end,
                case when new.step = 'backoff' then new.next_restart_at end,
                case when tg_op = 'UPDATE' and new.upgrade_state is distinct from old.upgrade_state then new.upgrade_state end,
                case when tg_op = 'UPDATE' and new.upgrade_state is distinct from old.upgrade_state and new.upgrade_state = 'rolled_back' then new.upgrade_reason end
                ${values});
        perform pg_notify('instance_status_events', '');
      end if;
      return null;
    end $$`.execute(db);
}
