import type { GatewayContext } from '../../context.ts';
import type { Waker } from '../sse.ts';

/** The outbox publishes within milliseconds of the container's removal, and retries a bus that was away every second. */
const DELETION_LAG_MS = 5000;

/**
 * The deletion of this user's instance, from the gateway's record of deletions (domain/instance-deletions.ts), or
 * undefined when it is not this user's or was never deleted. The provisioner hides an instance (its reads answer
 * 404) before it publishes the deletion, once its container and volume are gone: a question in between waits up to
 * DELETION_LAG_MS for the instance's next event (`waker`, signalled by its watch) and asks again. The wake is the
 * event's core-NATS delivery, which can come before the stream has stored it, so after a wake it asks every 50 ms.
 */
export async function deletionOf(
  ctx: GatewayContext,
  waker: Waker,
  instanceId: string,
  userId: string,
): Promise<{ seq: number; deleted_at: string } | undefined> {
  const deadline = Date.now() + DELETION_LAG_MS;
  for (let soon = 0; ; ) {
    waker.reset();
    const d = await ctx.instanceDeletions.find(instanceId);
    if (d) return d.user_id === userId ? { seq: d.seq, deleted_at: d.deleted_at.toISOString() } : undefined;
    const left = deadline - Date.now();
    if (left <= 0) return undefined;
    await waker.sleep(soon > 0 ? Math.min(50, left) : left);
    // The whole wait passed with no event of this instance: it was not deleted (asking again would cost a read for nothing).
    if (!waker.woken && soon <= 0) return undefined;
    soon = waker.woken ? 20 : soon - 1;
  }
}
