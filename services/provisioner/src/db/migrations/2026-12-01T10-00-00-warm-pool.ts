import { sql, type Kysely } from 'kysely';

/**
 * claim_pooled_instance: a create takes one of the warm pool's checkpointed agents (docs/decisions/0063-...) under the
 * same per-user lock and count as lease_instance, so a claim can never take a user past their tier's limit. The
 * agent must match what a create would make now: framework, version, image ID and the tier's limits. The row is
 * taken with SKIP LOCKED, so concurrent creates take different agents, and it becomes the user's in the same
 * statement: from then on it is an instance like any other.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function claim_pooled_instance(
      p_pool uuid, p_user uuid, p_limit int, p_user_lock int, p_framework text, p_version text, p_tier text, p_digest text,
      p_memory_mb int, p_cpus real, p_pids int, p_name text, p_wallet text
    ) returns setof instances
    language plpgsql
    as $$
    declare
      v_count int;
    begin
      perform pg_advisory_xact_lock(p_user_lock, hashtext(p_user::text));
      if p_limit <> -1 then
        select count(*) into v_count from instances where user_id = p_user and deleting_at is null;
        if v_count >= p_limit then
          raise exception 'instance limit reached' using errcode = 'AH001';
        end if;
      end if;
      return query
        update instances i
        set user_id = p_user, name = coalesce(p_name, p_framework || '-' || right(i.id, 6)), wallet_address = p_wallet,
            created_at = now(), started_at = now(), last_activity = now(), updated_at = now(), traffic_at = null
        where i.id = (
          select c.id from instances c
          where c.user_id = p_pool and c.framework = p_framework and c.version = p_version and c.tier = p_tier
            and c.image_digest = p_digest and c.memory_mb = p_memory_mb and c.cpus = p_cpus and c.pids = p_pids
            and c.status = 'sleeping' and c.sleep_depth = 'checkpointed' and c.step = 'done' and c.deleting_at is null
          order by c.created_at
          limit 1
          for update skip locked
        )
        returning i.*;
    end
    $$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop function claim_pooled_instance(uuid, uuid, int, int, text, text, text, text, int, real, int, text, text)`.execute(db);
}
