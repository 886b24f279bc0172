import { AppError, contracts, toAppError, zodToAppError } from '@agenthost/shared';
import { z } from 'zod';
import type { GatewayContext } from '../../context.ts';
import type { InstanceEvent } from '../../domain/instance-events.ts';
import type { Route } from '../route.ts';
import { Waker } from '../sse.ts';
import { deletionOf } from './deletion.ts';
import { instanceId } from './instances.ts';

const P = contracts.provisioner;

const waitQuery = z.object({
  state: z.enum(['running', 'stopped', 'sleeping', 'deleted']),
  timeout: z.coerce.number().int().min(1).max(60).default(30).describe('seconds'),
});

const waitAnswer = z.object({
  instance_id: contracts.instanceId,
  status: z.enum(['provisioning', 'running', 'stopped', 'failed', 'sleeping', 'deleted']),
  /** When the state was reached (the event's time, or the deletion's), or when it was read if it already held. */
  at: contracts.isoTime,
});

type Outcome = { status: z.infer<typeof waitAnswer>['status']; at: string; failure_reason?: string };

/**
 * GET /instance/wait/{id}: the listener is registered before the status is read, so a change between the read and
 * the registration is never missed; the first of (already there, event, failure, timeout) answers.
 */
export const waitRoutes = (ctx: GatewayContext): Route[] => [
  {
    method: 'get',
    path: '/instance/wait/:instanceId',
    operationId: 'waitForInstance',
    errors: ['WAIT_TIMEOUT', 'WAIT_INSTANCE_FAILED'],
    access: 'subscriber',
    summary: 'Wait until the instance is running, stopped, sleeping or deleted (408 WAIT_TIMEOUT at the timeout; 409 WAIT_INSTANCE_FAILED early if it fails)',
    query: waitQuery,
    response: waitAnswer,
    handler: async ({ req, res, caller, requestId }) => {
      const q = waitQuery.safeParse(req.query);
      if (!q.success) throw zodToAppError(q.error);
      const { state, timeout } = q.data;
      const id = instanceId(req.params);
      let settle!: (o: Outcome) => void;
      const reached = new Promise<Outcome>((resolve) => (settle = resolve));
      const decide = (o: Outcome) => {
        if (o.status === state || (o.status === 'failed' && state !== 'deleted')) settle(o);
      };
      const read = async () => {
        const now = await ctx.call(P.get, { user_id: caller.user_id, instance_id: id }, requestId);
        decide({ status: now.status, at: new Date().toISOString(), ...(now.failure_reason ? { failure_reason: now.failure_reason } : {}) });
      };
      const waker = new Waker();
      const stopWatching = ctx.instanceEvents.watch(id, (ev: InstanceEvent) => {
        waker.signal();
        // After a reconnect of the bus the change may have been missed: read the status again (a 404 now means deleted).
        if (ev.kind === 'recheck') {
          void read().catch((err: unknown) => {
            if (toAppError(err).code === 'INSTANCE_NOT_FOUND') decide({ status: 'deleted', at: new Date().toISOString() });
          });
        } else
          decide(
            ev.kind === 'deleted'
              ? { status: 'deleted', at: ev.at }
              : { status: ev.status, at: ev.at, ...(ev.failure_reason ? { failure_reason: ev.failure_reason } : {}) },
          );
      });
      const timer = setTimeout(() => settle({ status: 'provisioning', at: '' }), timeout * 1000);
      const gone = () => settle({ status: 'provisioning', at: '' });
      res.once('close', gone);
      try {
        // Owner check first: another user's instance is 404. One of the caller's deleted before the wait began is
        // gone from the provisioner: waiting for `deleted`, the gateway's record of deletions answers at once.
        try {
          await read();
        } catch (err) {
          if (state !== 'deleted' || toAppError(err).code !== 'INSTANCE_NOT_FOUND') throw err;
          const deleted = await deletionOf(ctx, waker, id, caller.user_id);
          if (!deleted) throw err;
          settle({ status: 'deleted', at: deleted.deleted_at });
        }
        const o = await reached;
        if (o.status === 'failed') {
          throw new AppError('WAIT_INSTANCE_FAILED', `The instance failed: ${o.failure_reason ?? 'no reason given'}`, {
            details: { failure_reason: o.failure_reason },
          });
        }
        if (o.status !== state) throw new AppError('WAIT_TIMEOUT', `The instance was not ${state} within ${timeout} s`, { retryable: true });
        return { instance_id: id, status: o.status, at: o.at };
      } finally {
        clearTimeout(timer);
        res.off('close', gone);
        stopWatching();
      }
    },
  },
];
