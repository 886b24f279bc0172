import { sql, type Kysely } from 'kysely';

// Idle sleep: `sleeping` is a status (an idle instance whose container the provisioner stopped; the edge wakes it on
// the next request), and traffic_at is when an edge last reported traffic to the instance (null: none since this
// migration or since it was created). The status outbox needs no change: it copies whatever status the row takes.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table instances drop constraint if exists instances_status_check`.execute(db);
  await sql`alter table instances add constraint instances_status_check check (status in ('provisioning', 'running', 'stopped', 'failed', 'sleeping'))`.execute(
    db,
  );
  await db.schema.alterTable('instances').addColumn('traffic_at', 'timestamptz').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('instances').dropColumn('traffic_at').execute();
  await sql`update instances set status = 'stopped' where status = 'sleeping'`.execute(db);
  await sql`alter table instances drop constraint if exists instances_status_check`.execute(db);
  await sql`alter table instances add constraint instances_status_check check (status in ('provisioning', 'running', 'stopped', 'failed'))`.execute(db);
}
