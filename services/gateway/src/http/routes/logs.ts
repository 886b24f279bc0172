import { AppError, contracts, request, toAppError } from '@agenthost/shared';
import { z } from 'zod';
import type { Response } from 'express';
import type { GatewayContext } from '../../context.ts';
import { queryString, type Route } from '../route.ts';
import { frame, heartbeat, openStream, Waker, write } from '../sse.ts';
import { instanceId } from './instances.ts';
import { holdStream } from './streams.ts';

const P = contracts.provisioner;

const lineEvent = z
  .object({ text: z.string() })
  .describe(
    'event: line (id: the docker timestamp of the line, "~n" for a further line of the same timestamp); resume with Last-Event-ID; comment lines are heartbeats',
  );

/** How long one page request waits for a first line at the provisioner (a long poll, not a busy one). */
const PAGE_WAIT_MS = 10_000;

const LINE_ID = P.logsPage.input.shape.after.unwrap();

/** `since`: seconds since the epoch (fractions allowed) or an RFC 3339 time. */
function sinceSeconds(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const t = /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : /^\d{4}-\d\d-\d\dT/.test(raw) ? Date.parse(raw) / 1000 : NaN;
  if (!Number.isFinite(t)) throw new AppError('VALIDATION_FAILED', 'since must be seconds since the epoch or an RFC 3339 time');
  return t;
}

/**
 * GET /instance/logs/{id}: the last lines, or with follow=true the container's output as server-sent events. The
 * stream crosses NATS as pages (README "Decisions"): the gateway asks the provisioner for the lines after the last
 * one it sent, the provisioner holds the request until a line comes (or PAGE_WAIT_MS), and the next page is asked
 * only after the previous one drained into the client's socket. A slow reader therefore holds one page at most, in
 * the gateway or anywhere; the rest waits in docker's log file.
 */
export const logRoutes = (ctx: GatewayContext): Route[] => [
  {
    method: 'get',
    path: '/instance/logs/:instanceId',
    access: 'subscriber',
    operationId: 'getInstanceLogs',
    errors: ['DOCKER_UNAVAILABLE'],
    summary: "The last lines of the agent's output; with follow=true its output as server-sent events (resume with Last-Event-ID)",
    query: z.object({
      tail: P.logs.input.shape.tail,
      follow: z.enum(['true', 'false']).optional().describe('true: server-sent events of each line, the last `tail` lines (or those from `since`) first'),
      since: z.string().optional().describe('with follow: start at this time (seconds since the epoch or RFC 3339) instead of the last `tail` lines'),
    }),
    response: P.logs.output,
    stream: lineEvent,
    requestHeaders: { 'Last-Event-ID': 'With follow: resume after this line id (the id of the last event received)' },
    handler: async ({ req, res, caller, requestId }) => {
      const id = instanceId(req.params);
      const follow = queryString(req, 'follow');
      if (follow !== undefined && follow !== 'true' && follow !== 'false') throw new AppError('VALIDATION_FAILED', 'follow must be true or false');
      // The provisioner validates the tail of plain logs; a follow's first page gets it as a number.
      const rawTail = queryString(req, 'tail');
      const tail = rawTail === undefined ? undefined : P.logs.input.shape.tail.safeParse(rawTail).data;
      if (rawTail !== undefined && tail === undefined) throw new AppError('VALIDATION_FAILED', 'tail must be a whole number from 1 to 5000');
      if (follow !== 'true') return ctx.call(P.logs, { user_id: caller.user_id, instance_id: id, ...(tail === undefined ? {} : { tail }) }, requestId);

      const given = req.get('last-event-id')?.trim();
      if (given !== undefined && !LINE_ID.safeParse(given).success) throw new AppError('VALIDATION_FAILED', 'Last-Event-ID must be a line id of this stream');
      const since = sinceSeconds(queryString(req, 'since'));
      const stream = await holdStream(ctx, { kind: 'logs', instance_id: id, user_id: caller.user_id });
      try {
        // Another user's instance, or none: the 404 before any header is sent.
        await ctx.call(P.get, { user_id: caller.user_id, instance_id: id }, requestId);
        await followLines(ctx, res, stream.expire, { user_id: caller.user_id, instance_id: id, requestId, after: given, since, tail });
      } finally {
        stream.release();
      }
      return undefined;
    },
  },
];

/**
 * Sends pages of the instance's output until the client goes away, the instance is deleted, the replica stops or the
 * stream's lifetime ends (`expire`): the client resumes after the last line id it got.
 */
async function followLines(
  ctx: GatewayContext,
  res: Response,
  expire: (end: () => void) => void,
  o: { user_id: string; instance_id: string; requestId: string; after: string | undefined; since: number | undefined; tail: number | undefined },
): Promise<void> {
  const pageTimeout = PAGE_WAIT_MS + ctx.config.NATS_REQUEST_TIMEOUT_MS;
  const waker = new Waker();
  const signal = waker.signal;
  // A stopped container has no lines to wait for: the next page is asked when its status changes (or at a heartbeat).
  const unwatch = ctx.instanceEvents.watch(o.instance_id, signal);
  openStream(res);
  let open = true;
  res.once('close', () => {
    open = false;
    signal();
  });
  // A client gone while the stream was being set up has closed already: no close event will come.
  if (res.closed || res.destroyed) open = false;
  const end = () => {
    open = false;
    signal();
    res.end();
  };
  const forget = ctx.instanceEvents.hold(end);
  expire(end);
  const beat = heartbeat(res, ctx.config.SSE_HEARTBEAT_SECONDS, 'heartbeat', signal);
  let after = o.after;
  try {
    while (open) {
      waker.reset();
      let page: contracts.provisioner.LogsPageOutput | undefined;
      try {
        const from = after !== undefined ? { after } : o.since !== undefined ? { since: o.since } : o.tail === undefined ? {} : { tail: o.tail };
        page = await request(
          ctx.nc,
          P.logsPage,
          { user_id: o.user_id, instance_id: o.instance_id, ...from, wait_ms: PAGE_WAIT_MS },
          { timeoutMs: pageTimeout, requestId: o.requestId, asserter: ctx.asserter },
        );
      } catch (err) {
        // The instance was deleted: nothing more will come.
        if (toAppError(err).code === 'INSTANCE_NOT_FOUND') break;
        ctx.log.warn({ err, request_id: o.requestId }, 'log follow page failed; retrying at the next heartbeat');
      }
      for (const line of page?.lines ?? []) {
        if (!(await write(res, frame(line.id, 'line', { text: line.text })))) open = false;
        if (!open) break;
        after = line.id;
      }
      if (open && (!page || (!page.running && page.lines.length === 0))) await waker.sleep();
    }
  } finally {
    clearInterval(beat);
    forget();
    unwatch();
    if (!res.writableEnded) res.end();
  }
}
