import { contracts, request, type Contract } from '@agenthost/shared';
import { z } from 'zod';
import type { GatewayContext } from '../context.ts';
import type { Router } from '../http/router.ts';
import { jsonBody, route, type Caller } from '../http/route.ts';
import { clientShape } from '../openapi.ts';

const P = contracts.provisioner;


// `subscriber` access guarantees an entitled subscription.
const tierOf = (c: Caller) => c.subscription!.tier;

/**
 * Calls that change containers wait longer than the gateway's default backend timeout: under a burst a
 * loaded Docker engine takes seconds to create and start containers, and a create that outlived the
 * gateway's timeout would succeed after the client was told 503. The provisioner bounds each Docker
 * call itself and answers 503 DOCKER_UNAVAILABLE at once when the engine is down; no responder is
 * still an immediate 503.
 */
const DOCKER_VERB_TIMEOUT_MS = 25_000;

/**
 * Instances (spec §4.7–4.10 plus list/stop/start/logs). Every call is scoped to the caller: the
 * provisioner looks instances up by id AND owner, so another user's instance is 404 for every verb.
 */
export function instanceRoutes(ctx: GatewayContext, r: Router): void {
  const slow = <C extends Contract>(c: C, input: z.input<C['input']>, requestId: string): Promise<z.output<C['output']>> =>
    request(ctx.nc, c, input, { timeoutMs: Math.max(ctx.config.NATS_REQUEST_TIMEOUT_MS, DOCKER_VERB_TIMEOUT_MS), requestId, asserter: ctx.asserter });
  route(r, ctx, 'post', '/instance/create', 'subscriber', { summary: 'Create an instance (status provisioning; running once its agent is ready)', body: clientShape(P.create.input), response: P.create.output }, async ({ req, caller, requestId }) => {
    // Only the fields a client may set; the owner, tier and cancellation come from the token and the subscription.
    const b = jsonBody(req);
    return slow(
      P.create,
      {
        user_id: caller.user_id,
        wallet_address: caller.wallet_address,
        tier: tierOf(caller),
        subscription_cancelled: caller.subscription!.cancelled,
        name: b.name as string | undefined,
        framework: b.framework as string,
        version: b.version as string | undefined,
      },
      requestId,
    );
  });
  route(r, ctx, 'get', '/instance/list', 'subscriber', { summary: "The caller's instances", response: P.list.output }, async ({ caller, requestId }) => ctx.call(P.list, { user_id: caller.user_id }, requestId));
  route(r, ctx, 'get', '/instance/status/:instanceId', 'subscriber', { summary: 'Status with live CPU, memory and uptime', response: P.get.output }, async ({ req, caller, requestId }) =>
    ctx.call(P.get, { user_id: caller.user_id, instance_id: String(req.params.instanceId) }, requestId),
  );
  route(r, ctx, 'post', '/instance/restart/:instanceId', 'subscriber', { summary: 'Recreate the container so the agent reloads its keys', response: P.restart.output }, async ({ req, caller, requestId }) =>
    slow(P.restart, { user_id: caller.user_id, instance_id: String(req.params.instanceId), tier: tierOf(caller) }, requestId),
  );
  route(r, ctx, 'post', '/instance/stop/:instanceId', 'subscriber', { summary: 'Stop the instance (data kept)', response: P.stop.output }, async ({ req, caller, requestId }) =>
    slow(P.stop, { user_id: caller.user_id, instance_id: String(req.params.instanceId) }, requestId),
  );
  route(r, ctx, 'post', '/instance/start/:instanceId', 'subscriber', { summary: 'Start a stopped or failed instance', response: P.start.output }, async ({ req, caller, requestId }) =>
    slow(P.start, { user_id: caller.user_id, instance_id: String(req.params.instanceId), tier: tierOf(caller) }, requestId),
  );
  route(r, ctx, 'delete', '/instance/delete/:instanceId', 'subscriber', { summary: 'Delete the instance, its volume, logs and keys permanently', response: P.remove.output }, async ({ req, caller, requestId }) =>
    slow(P.remove, { user_id: caller.user_id, instance_id: String(req.params.instanceId) }, requestId),
  );
  // Backups (docker driver). A backup or restore pauses or recreates the container: the slow timeout.
  route(r, ctx, 'post', '/instance/backup/:instanceId', 'subscriber', { summary: "Back up the instance's data now (the agent is paused for the copy)", response: P.backup.output }, async ({ req, caller, requestId }) =>
    slow(P.backup, { user_id: caller.user_id, instance_id: String(req.params.instanceId), tier: tierOf(caller) }, requestId),
  );
  route(r, ctx, 'get', '/instance/backups/:instanceId', 'subscriber', { summary: 'The backups of an instance, newest first (also of a deleted one)', response: P.backups.output }, async ({ req, caller, requestId }) =>
    ctx.call(P.backups, { user_id: caller.user_id, instance_id: String(req.params.instanceId) }, requestId),
  );
  route(
    r,
    ctx,
    'post',
    '/instance/restore/:instanceId',
    'subscriber',
    { summary: "Replace the instance's data with a backup's and restart it; returns a new access token, once", body: z.object({ backup_id: P.backupId }), response: P.restore.output },
    async ({ req, caller, requestId }) =>
      slow(P.restore, { user_id: caller.user_id, instance_id: String(req.params.instanceId), backup_id: jsonBody(req).backup_id as string, tier: tierOf(caller) }, requestId),
  );
  route(
    r,
    ctx,
    'post',
    '/instance/clone/:instanceId',
    'subscriber',
    { summary: 'A new instance holding a backup of this instance (which may be deleted); counts like a create', body: clientShape(P.clone.input.omit({ instance_id: true })), response: P.clone.output },
    async ({ req, caller, requestId }) => {
      const b = jsonBody(req);
      return slow(
        P.clone,
        {
          user_id: caller.user_id,
          wallet_address: caller.wallet_address,
          tier: tierOf(caller),
          subscription_cancelled: caller.subscription!.cancelled,
          instance_id: String(req.params.instanceId),
          backup_id: b.backup_id as string,
          name: b.name as string | undefined,
        },
        requestId,
      );
    },
  );
  route(r, ctx, 'delete', '/instance/backup/:instanceId/:backupId', 'subscriber', { summary: 'Delete one backup of an instance', response: P.removeBackup.output }, async ({ req, caller, requestId }) =>
    ctx.call(P.removeBackup, { user_id: caller.user_id, instance_id: String(req.params.instanceId), backup_id: String(req.params.backupId) }, requestId),
  );
  route(r, ctx, 'get', '/instance/logs/:instanceId', 'subscriber', { summary: "The last lines of the agent's output", query: z.object({ tail: P.logs.input.shape.tail }), response: P.logs.output }, async ({ req, caller, requestId }) =>
    ctx.call(
      P.logs,
      { user_id: caller.user_id, instance_id: String(req.params.instanceId), ...(req.query.tail === undefined ? {} : { tail: req.query.tail as unknown as number }) },
      requestId,
    ),
  );
}
