import { sql, type Kysely } from 'kysely';

// A third sleep depth (docs/decisions/0049-...): `checkpointed`, the agent's processes dumped to an encrypted image
// while its container runs on with hold-init alone. checkpoint_id names the image the row expects: a fresh random id
// per checkpoint, part of what the image is sealed to, so an older image of the same instance does not open.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table instances drop constraint instances_sleep_depth_check`.execute(db);
  await sql`alter table instances add constraint instances_sleep_depth_check check (sleep_depth in ('frozen', 'swapped', 'checkpointed', 'stopped'))`.execute(
    db,
  );
  await db.schema.alterTable('instances').addColumn('checkpoint_id', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`update instances set sleep_depth = 'stopped' where sleep_depth = 'checkpointed'`.execute(db);
  await db.schema.alterTable('instances').dropColumn('checkpoint_id').execute();
  await sql`alter table instances drop constraint instances_sleep_depth_check`.execute(db);
  await sql`alter table instances add constraint instances_sleep_depth_check check (sleep_depth in ('frozen', 'swapped', 'stopped'))`.execute(db);
}
