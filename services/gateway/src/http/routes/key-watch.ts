import { contracts, zodToAppError } from '@agenthost/shared';
import { z } from 'zod';
import type { Request } from 'express';
import type { GatewayContext } from '../../context.ts';
import { jsonBody, type Route } from '../route.ts';
import { frame, heartbeat, openStream, write } from '../sse.ts';
import { holdStream } from './streams.ts';

const kv = contracts.keyvault;
const K = contracts.keys;

/** Sent every so often so that proxies and the bootstrap see a live connection. */
const HEARTBEAT_SECONDS = 15;

/** A header for keyvault; oversized values become '' (an authentication failure there, never a 400). */
export const instanceHeader = (req: Request, name: string, max: number): string => {
  const v = req.get(name) ?? '';
  return v.length > max ? '' : v;
};

const watchEvent = z.object({
  keys: kv.retrieve.output.shape.keys,
  change_id: K.changeId.nullable().describe('null for the keys as they are when the watch opens; set for a change, to be answered on POST /keys/applied'),
});

/**
 * The instance side of key hot reload. GET /keys/watch (instance credentials) is a server-sent event stream:
 * a `keys` event with the instance's sealed keys when it opens (so a bootstrap that reconnects catches up on
 * anything it missed) and again at every change. POST /keys/applied carries the bootstrap's result of a change;
 * it needs no instance secret because only the instance's own watch ever saw the change_id it must quote.
 */
export const keyWatchRoutes = (ctx: GatewayContext): Route[] => [
  {
    method: 'get',
    path: '/keys/watch',
    access: 'instance',
    operationId: 'watchKeys',
    summary: "Server-sent events: the instance's sealed keys now and at every change (instance credentials)",
    response: watchEvent,
    responseType: 'text/event-stream',
    handler: async ({ req, res, requestId, meta }) => {
      const creds = { instance_id: instanceHeader(req, 'x-instance-id', 100), instance_secret: instanceHeader(req, 'x-instance-secret', 200), meta };
      // Authenticates the instance (401/429 as for /keys/retrieve) before the stream starts.
      const first = await ctx.call(kv.retrieve, creds, requestId);
      // An instance's bootstrap holds one watch; the per-instance cap bounds what its credentials can hold open.
      const stream = await holdStream(ctx, { kind: 'keys', instance_id: creds.instance_id }, ctx.config.KEYS_WATCH_MAX_SECONDS);
      try {
        openStream(res);
        const send = (data: z.input<typeof watchEvent>) => write(res, frame(undefined, 'keys', data));
        void send({ keys: first.keys, change_id: null });
        const end = () => res.end();
        // The replica keeps the instance's credentials for the watch's life, to read the keys again at a change.
        const release = ctx.keyReload.hold(
          creds.instance_id,
          async (changeId) => {
            const next = await ctx.call(kv.retrieve, creds, requestId);
            if (!(await send({ keys: next.keys, change_id: changeId }))) throw new Error('watch closed');
          },
          end,
        );
        const beat = heartbeat(res, HEARTBEAT_SECONDS, 'keep-alive');
        // After KEYS_WATCH_MAX_SECONDS the bootstrap reconnects and authenticates again.
        stream.expire(end);
        // A client gone while the watch was being set up has closed already: no close event will come.
        await new Promise<void>((resolve) => (res.closed || res.destroyed ? resolve() : res.once('close', resolve)));
        clearInterval(beat);
        release();
      } finally {
        stream.release();
      }
    },
  },
  {
    method: 'post',
    path: '/keys/applied',
    // No credentials: the change_id is the proof (see above), and a wrong one only reaches a waiter that ignores it.
    access: 'public',
    operationId: 'reportKeysApplied',
    summary: 'The bootstrap reports whether it reloaded a key change (quoting the change_id its watch received)',
    body: K.appliedReport,
    response: z.object({ received: z.boolean() }),
    handler: ({ req }) => {
      const parsed = K.appliedReport.safeParse(jsonBody(req));
      if (!parsed.success) throw zodToAppError(parsed.error);
      ctx.keyReload.report(parsed.data);
      return { received: true };
    },
  },
];
