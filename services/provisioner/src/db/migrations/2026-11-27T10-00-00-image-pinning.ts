import { sql, type Kysely } from 'kysely';

// Pinned images and upgrades. An instance records the image its version resolved to at create (image_digest: the
// local image ID, docs/decisions/0026-pinned-images-and-upgrades.md), and its containers are created from that ID, so a rebuilt tag never
// changes a running instance on a restart. An upgrade (POST /instance/upgrade) keeps what it moves away from in
// upgrade_from_* until the agent is ready on the new image; upgrade_to_version is its target; upgrade_state says how it went (upgrading, upgraded,
// rolled_back with upgrade_reason). The status outbox carries the upgrade with its event: note_status_change is
// restated whole (see migrations/index.ts) with a change of upgrade_state as a reason for an event.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('instances')
    .addColumn('image_digest', 'text')
    .addColumn('upgrade_state', 'text')
    .addColumn('upgrade_reason', 'text')
    .addColumn('upgrade_from_version', 'text')
    .addColumn('upgrade_from_image', 'text')
    .addColumn('upgrade_from_digest', 'text')
    .addColumn('upgrade_to_version', 'text')
    .execute();
  await db.schema.alterTable('status_events').addColumn('upgrade', 'text').addColumn('upgrade_reason', 'text').execute();
  await noteStatusChange(db, true);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await noteStatusChange(db, false);
  await db.schema.alterTable('status_events').dropColumn('upgrade').dropColumn('upgrade_reason').execute();
  await db.schema
    .alterTable('instances')
    .dropColumn('image_digest')
    .dropColumn('upgrade_state')
    .dropColumn('upgrade_reason')
    .dropColumn('upgrade_from_version')
    .dropColumn('upgrade_from_image')
    .dropColumn('upgrade_from_digest')
    .dropColumn('upgrade_to_version')
    .execute();
}

/** note_status_change as of 2026-11-23T21-00-00-oom-kills (exit kind included), with (or without) the upgrade fields. */
async function noteStatusChange(db: Kysely<unknown>, upgrades: boolean): Promise<void> {
  const upgradeChanged = upgrades ? sql`or (tg_op = 'UPDATE' and new.upgrade_state is distinct from old.upgrade_state)` : sql``;
  const insert = upgrades
    ? sql`insert into status_events (instance_id, user_id, status, failure_reason, generation, restarts, exit_reason, exit_kind, next_restart_at, upgrade, upgrade_reason)
          values (new.id, new.user_id, new.status, case when new.status = 'failed' then new.failure_reason end, new.generation, new.restarts,
                  case when new.step = 'backoff' then new.last_exit_reason end, case when new.step = 'backoff' then new.last_exit_kind end,
                  case when new.step = 'backoff' then new.next_restart_at end,
                  case when tg_op = 'UPDATE' and new.upgrade_state is distinct from old.upgrade_state then new.upgrade_state end,
                  case when tg_op = 'UPDATE' and new.upgrade_state is distinct from old.upgrade_state and new.upgrade_state = 'rolled_back' then new.upgrade_reason end);`
    : sql`insert into status_events (instance_id, user_id, status, failure_reason, generation, restarts, exit_reason, exit_kind, next_restart_at)
          values (new.id, new.user_id, new.status, case when new.status = 'failed' then new.failure_reason end, new.generation, new.restarts,
                  case when new.step = 'backoff' then new.last_exit_reason end, case when new.step = 'backoff' then new.last_exit_kind end,
                  case when new.step = 'backoff' then new.next_restart_at end);`;
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
        ${upgradeChanged} then
        ${insert}
        perform pg_notify('instance_status_events', '');
      end if;
      return null;
    end $$`.execute(db);
}
