import { sql, type Kysely } from 'kysely';

/**
 * The lease of a create as ONE round trip: per-user lock → count → refuse at the limit → global port
 * lock → lowest free port → insert. The locks are transaction-scoped, so a call made as a single
 * statement holds them only for the fraction of a millisecond the function runs: concurrent creates
 * queue behind each other for that long, not for several client round trips.
 * Refusals use their own SQLSTATEs (AH001 limit reached, AH002 no free port).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function lease_instance(
      p_id text, p_user uuid, p_limit int, p_port_start int, p_port_end int, p_user_lock int, p_port_lock int,
      p_name text, p_framework text, p_version text, p_image text, p_tier text, p_memory_mb int, p_cpus real, p_pids int, p_token_hash text
    ) returns setof instances
    language plpgsql
    set search_path from current
    as $$
    declare
      v_count int;
      v_port int;
    begin
      perform pg_advisory_xact_lock(p_user_lock, hashtext(p_user::text));
      if p_limit <> -1 then
        select count(*) into v_count from instances where user_id = p_user and deleting_at is null;
        if v_count >= p_limit then
          raise exception 'instance limit reached' using errcode = 'AH001';
        end if;
      end if;
      perform pg_advisory_xact_lock(p_port_lock, 0);
      select p into v_port from generate_series(p_port_start, p_port_end) p
        where not exists (select 1 from instances i where i.port = p) order by p limit 1;
      if v_port is null then
        raise exception 'no free port' using errcode = 'AH002';
      end if;
      return query
        insert into instances (id, user_id, name, framework, version, image, tier, memory_mb, cpus, pids, port, status, step, access_token_hash)
        values (p_id, p_user, p_name, p_framework, p_version, p_image, p_tier, p_memory_mb, p_cpus, p_pids, v_port, 'provisioning', 'leased', p_token_hash)
        returning *;
    end
    $$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop function lease_instance`.execute(db);
}
