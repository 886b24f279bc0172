import { AppError, contracts, toAppError } from '@agenthost/shared';
import { z } from 'zod';
import type { GatewayContext } from '../../context.ts';
import { StreamReader, type StoredEvent } from '../../domain/stream-reader.ts';
import { holdStream } from './streams.ts';
import type { Route } from '../route.ts';
import { follow, frame, idFrame, liveStream, openStream, Waker, write } from '../sse.ts';
import { deletionOf } from './deletion.ts';
import { instanceId } from './instances.ts';

const P = contracts.provisioner;

const eventData = z
  .union([
    P.instanceStatusChanged.payload.describe('event: status (id: the stream sequence)'),
    P.instanceDeleted.payload.describe('event: deleted, the last event of the stream'),
    z
      .object({ instance_id: contracts.instanceId, status: P.instanceStatus, at: contracts.isoTime, failure_reason: z.string().optional() })
      .describe('event: current, first on a new stream (no Last-Event-ID); its id is where a resume starts'),
  ])
  .describe('Server-sent events: id is the JetStream sequence; resume with Last-Event-ID; comment lines are heartbeats');

const LAST_EVENT_ID = /^\d{1,15}$/;

/**
 * GET /instance/events/{id}: the instance's lifecycle events from JetStream as server-sent events. The reader pulls one
 * event at a time and writes it only after the previous write drained, so a slow client holds at most one event and
 * the socket's buffer: it falls behind in the stream, never in the gateway's memory.
 */
export const eventRoutes = (ctx: GatewayContext): Route[] => {
  const reader = new StreamReader(ctx.nc, ctx.config.NATS_REQUEST_TIMEOUT_MS);
  return [
    {
      method: 'get',
      path: '/instance/events/:instanceId',
      operationId: 'streamInstanceEvents',
      access: 'subscriber',
      summary: "Server-sent events: the instance's status changes and its deletion from JetStream (resume with Last-Event-ID)",
      response: eventData,
      responseType: 'text/event-stream',
      requestHeaders: { 'Last-Event-ID': 'Resume after this event id (the JetStream sequence of the last event received)' },
      // 410: the stream no longer keeps the events after the Last-Event-ID (reconnect without it); 429: too many open streams.
      errors: ['LAST_EVENT_ID_EXPIRED'],
      handler: async ({ req, res, caller, requestId }) => {
        const id = instanceId(req.params);
        const given = req.get('last-event-id');
        if (given !== undefined && !LAST_EVENT_ID.test(given.trim()))
          throw new AppError('VALIDATION_FAILED', 'Last-Event-ID must be an event id of this stream (a number)');
        const resumeFrom = given === undefined ? undefined : Number(given.trim());
        const mine = (ev: StoredEvent) => ev.data.instance_id === id && ev.data.user_id === caller.user_id;
        const stream = await holdStream(ctx, { kind: 'events', instance_id: id, user_id: caller.user_id });
        // Registered before anything is read, so no change between the read and the first wait is missed.
        const waker = new Waker();
        const signal = waker.signal;
        const unwatch = ctx.instanceEvents.watch(id, signal);
        try {
          // Read before the status, so a change between the two is sent as an event after `current`, never lost.
          const bounds = await reader.bounds();
          if (resumeFrom !== undefined && resumeFrom < bounds.first - 1) throw new AppError('LAST_EVENT_ID_EXPIRED');
          let cursor: number;
          let first: string | undefined;
          try {
            const now = await ctx.call(P.get, { user_id: caller.user_id, instance_id: id }, requestId);
            cursor = resumeFrom ?? bounds.last;
            if (resumeFrom === undefined) {
              first = frame(cursor, 'current', {
                instance_id: id,
                status: now.status,
                at: new Date().toISOString(),
                ...(now.failure_reason ? { failure_reason: now.failure_reason } : {}),
              });
            }
          } catch (err) {
            // A deleted instance is gone from the provisioner: a client resuming after it may still read up to its deletion.
            if (resumeFrom === undefined || toAppError(err).code !== 'INSTANCE_NOT_FOUND') throw err;
            if (!(await deletedAfter(ctx, waker, id, caller.user_id, resumeFrom))) throw err;
            cursor = resumeFrom;
          }
          openStream(res);
          // The last id the client has: at the lifetime's end it is told how far the stream was read (an id without
          // data), so its resume does not read again the other instances' events in between.
          let sent = cursor;
          const live = liveStream(res, waker, (end) => ctx.instanceEvents.hold(end), ctx.config.SSE_HEARTBEAT_SECONDS);
          stream.expire(() => {
            if (cursor > sent) void write(res, idFrame(cursor));
            live.end();
          });
          try {
            if (first) await write(res, first);
            for await (const ev of follow((from) => reader.next(from), waker, cursor, live.isOpen)) {
              cursor = ev.seq;
              if (!mine(ev)) continue;
              const kind = ev.subject === P.instanceDeleted.subject ? 'deleted' : ev.subject === P.instanceStatusChanged.subject ? 'status' : undefined;
              if (!kind) continue;
              sent = ev.seq;
              if (!(await write(res, frame(ev.seq, kind, ev.data)))) break;
              // Nothing follows a deletion: the stream ends, and a resume after it answers the rest (none).
              if (kind === 'deleted') break;
            }
          } catch (err) {
            // Headers are gone: the client sees the stream end and resumes from its last id.
            ctx.log.warn({ err, request_id: requestId }, 'instance event stream ended by an error');
          } finally {
            live.close();
          }
        } finally {
          unwatch();
          stream.release();
        }
      },
    },
  ];
};

/** Whether this user's instance was deleted after event `from` (one question to the gateway's record of deletions). */
async function deletedAfter(ctx: GatewayContext, waker: Waker, id: string, userId: string, from: number): Promise<boolean> {
  const d = await deletionOf(ctx, waker, id, userId);
  return d !== undefined && d.seq > from;
}
