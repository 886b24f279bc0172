import { AppError, type contracts, type TierLimits } from '@agenthost/shared';
import type { InstanceRow } from '../db/schema.ts';
import { describe } from '../docker/call.ts';
import { observePoolClaim } from '../metrics.ts';
import type { ProvisionerConfig } from '../config.ts';
import type { InstanceLifecycle, LifecycleDeps } from './lifecycle.ts';
import { instanceView } from './instance-view.ts';
import { timer } from './steps.ts';

type View = contracts.provisioner.InstanceView;

/** What a claim needs of the create saga's parts (create.ts). */
type ClaimDeps = Pick<LifecycleDeps, 'repo' | 'runtime' | 'locks' | 'log' | 'issueCredentials' | 'events' | 'readiness'> & {
  config: ProvisionerConfig;
  lifecycle: Pick<InstanceLifecycle, 'recreateLocked'>;
  pool?: { serves(framework: string, tier: string): boolean; claimed(): void };
};
type CreateInput = contracts.In<typeof contracts.provisioner.create>;

/** The lease's and the claim's refusal at the tier's instance limit (SQLSTATE AH001). */
export function limitError(err: unknown, tier: string, limit: number): unknown {
  if ((err as { code?: string }).code !== 'AH001') return err;
  return new AppError('INSTANCE_LIMIT_EXCEEDED', `The ${tier} tier allows ${limit} instance${limit === 1 ? '' : 's'}`);
}

/**
 * A create served from the warm pool (docs/decisions/0063-...): the oldest checkpointed pool agent that matches the
 * create (framework, version, image ID, the tier's limits) becomes the user's in one statement, under the same
 * per-user count as a lease. Then, under its lock: the user's credentials are issued, the agent is restored from its
 * own checkpoint (its random state its own, restored once) and handed them, and its key watch brings the user's keys
 * as a key change does. Undefined when the pool has no such agent: the caller boots one as before.
 *
 * Once claimed, the instance is the user's whatever happens next: an agent that cannot be restored boots instead (the
 * wake's fallback, with a warning on its status), and only when that boot fails does the instance fail.
 */
export async function claimFromPool(
  deps: ClaimDeps,
  input: CreateInput,
  wanted: { version: string; digest: string; limits: TierLimits },
): Promise<(View & { access_token: string }) | undefined> {
  const { repo, runtime, locks, log, config } = deps;
  const checkpoints = runtime.checkpoints;
  if (!deps.pool?.serves(input.framework, input.tier) || !checkpoints || !runtime.handOver) return undefined;
  const { limits } = wanted;
  const t = timer();
  let row: InstanceRow | undefined;
  try {
    row = await repo.claimPooled({
      userId: input.user_id,
      maxInstances: limits.instances,
      framework: input.framework,
      version: wanted.version,
      tier: input.tier,
      digest: wanted.digest,
      memoryMb: limits.memory_mb,
      cpus: limits.cpus,
      pids: limits.pids,
      name: input.name ?? null,
      wallet: input.wallet_address ?? null,
    });
  } catch (err) {
    throw limitError(err, input.tier, limits.instances);
  }
  deps.pool.claimed(); // a refill starts at once
  if (!row) {
    observePoolClaim('empty');
    return undefined;
  }
  t.lap('claim');
  const id = row.id;
  const release = await locks.hold(id);
  let claimDone = false;
  try {
    let fresh = (await repo.byId(id)) ?? row;
    const token = await runtime.token(id);
    let restored = true;
    let accessToken = token;
    const ready = fresh.status === 'sleeping' && fresh.sleep_depth === 'checkpointed' && fresh.checkpoint_id && token;
    let why = ready ? undefined : 'the pooled agent was no longer asleep in its container';
    if (ready) {
      try {
        const took = await checkpoints.restore(id, fresh.checkpoint_id!, fresh.cpus);
        await repo.markThawed(id, false);
        log.info({ instance_id: id, ...took }, 'pooled agent restored for its new owner');
      } catch (err) {
        if (err instanceof AppError && err.code === 'DOCKER_UNAVAILABLE') {
          // Nothing of it reached the user: it goes back to the pool to be removed (no event, no keys) once Docker answers.
          await repo.abandonClaim(id);
          throw err;
        }
        why = describe(err);
      }
      t.lap('restore');
    }
    if (!why) {
      try {
        // Its bootstrap waits for them (AGENTHOST_CREDENTIALS=stdin-late), then opens the key watch.
        await runtime.handOver(id, await deps.issueCredentials(input.user_id, id));
        t.lap('credentials');
      } catch (err) {
        why = `its credentials could not be handed over: ${describe(err)}`;
      }
    }
    if (why) {
      // The wake's fallback: a boot of the same instance (new container from the intended spec, same volume and port).
      log.warn({ instance_id: id, reason: why }, 'pooled agent could not be restored; booting it');
      const minted = await deps.lifecycle.recreateLocked(fresh, undefined, {
        wakeWarning: `The pooled agent could not be restored (${why}); it boots instead`,
      });
      accessToken = minted ?? token!;
      restored = false;
    }
    fresh = (await repo.byId(id)) ?? fresh;
    await deps.events.created({ instance_id: id, user_id: input.user_id, created_at: fresh.created_at.toISOString() });
    claimDone = true;
    observePoolClaim(restored ? 'restored' : 'booted');
    log.info({ instance_id: id, user_id: input.user_id, port: fresh.port, image: fresh.image, ms: t.laps, pooled: true }, 'instance created');
    return {
      ...instanceView(fresh, config.INSTANCE_URL_TEMPLATE),
      // The create's answer says provisioning, as the spec has it; a restored agent already runs (its status says so).
      status: 'provisioning',
      estimated_ready: new Date(Date.now() + (restored ? 0 : deps.readiness.estimateSeconds() * 1000)).toISOString(),
      access_token: accessToken!,
    };
  } catch (err) {
    // Claimed, then neither restored nor booted, or not announced (Docker or NATS gone, a boot that could not even be
    // created): the create fails and the instance goes, as a failed create's does; the reconciler finishes the delete.
    if (!claimDone) await repo.markDeleting(id).catch((e) => log.error({ instance_id: id, err: describe(e) }, 'could not mark a failed claim for removal'));
    throw err;
  } finally {
    await release();
  }
}
