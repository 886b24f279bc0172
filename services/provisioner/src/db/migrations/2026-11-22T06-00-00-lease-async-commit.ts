import { sql, type Kysely } from 'kysely';

/**
 * lease_instance, plus the owner's wallet in the same insert, committed without waiting for the disk.
 * Concurrent creates queue on the lease's locks, which are held until commit: an fsync inside that queue
 * cost each create of a burst up to ~40 ms. set_config(…, true) lasts until the end of the transaction,
 * so this function has no SET clause (one would undo it on return) and finds its table through the
 * session's search_path. Nothing is answered on a lease alone: the create's next commit (synchronous)
 * flushes the WAL through the lease, and a lease lost with a crash of Postgres leaves at most a labelled
 * container without a row, which the reconciler removes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`drop function lease_instance`.execute(db);
  await sql`
    create function lease_instance(
      p_id text, p_user uuid, p_limit int, p_port_start int, p_port_end int, p_user_lock int, p_port_lock int,
      p_name text, p_framework text, p_version text, p_image text, p_tier text, p_memory_mb int, p_cpus real, p_pids int, p_token_hash text,
      p_wallet text
    ) returns setof instances
    language plpgsql
    as $$
    declare
      v_count int;
      v_port int;
    begin
      perform set_config('synchronous_commit', 'off', true);
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
        insert into instances (id, user_id, name, framework, version, image, tier, memory_mb, cpus, pids, port, status, step, access_token_hash, wallet_address)
        values (p_id, p_user, p_name, p_framework, p_version, p_image, p_tier, p_memory_mb, p_cpus, p_pids, v_port, 'provisioning', 'leased', p_token_hash, p_wallet)
        returning *;
    end
    $$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop function lease_instance(text, uuid, int, int, int, int, int, text, text, text, text, text, int, real, int, text, text)`.execute(db);
}
