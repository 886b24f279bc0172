import { contracts, request, type Contract } from '@agenthost/shared';
import type { z } from 'zod';
import type { GatewayContext } from '../../context.ts';
import { clientShape } from '../openapi.ts';
import { jsonBody, type Caller, type Route } from '../route.ts';

const P = contracts.provisioner;

// `subscriber` access guarantees an entitled subscription.
export const tierOf = (c: Caller) => c.subscription!.tier;

/** Who a new instance (a create or a clone) is for: from the token and the subscription, never from the body. */
export const newInstanceOwner = (c: Caller) => ({
  user_id: c.user_id,
  wallet_address: c.wallet_address,
  tier: tierOf(c),
  subscription_cancelled: c.subscription!.cancelled,
});

/**
 * Calls that change containers wait longer than the gateway's default backend timeout: under a burst a
 * loaded Docker engine takes seconds to create and start containers, and a create that outlived the
 * gateway's timeout would succeed after the client was told 503. The provisioner bounds each Docker
 * call itself and answers 503 DOCKER_UNAVAILABLE at once when the engine is down; no responder is
 * still an immediate 503.
 */
const DOCKER_VERB_TIMEOUT_MS = 25_000;

/**
 * Instances (spec §4.7–4.10 plus list/stop/start; logs in logs.ts). Every call is scoped to the caller: the
 * provisioner looks instances up by id AND owner, so another user's instance is 404 for every verb.
 */
/** A call that changes containers, with the longer timeout. */
export const slowCall =
  (ctx: GatewayContext) =>
  <C extends Contract>(c: C, input: z.input<C['input']>, requestId: string): Promise<z.output<C['output']>> =>
    request(ctx.nc, c, input, { timeoutMs: Math.max(ctx.config.NATS_REQUEST_TIMEOUT_MS, DOCKER_VERB_TIMEOUT_MS), requestId, asserter: ctx.asserter });

export const instanceId = (params: Record<string, string | string[]>) => String(params.instanceId);

export function instanceRoutes(ctx: GatewayContext): Route[] {
  const slow = slowCall(ctx);
  const id = instanceId;
  return [
    {
      method: 'post',
      path: '/instance/create',
      access: 'subscriber',
      operationId: 'createInstance',
      errors: ['INSTANCE_LIMIT_EXCEEDED', 'STORAGE_LIMIT_EXCEEDED', 'SUBSCRIPTION_CANCELLED', 'PORTS_EXHAUSTED', 'CONFLICT', 'DOCKER_UNAVAILABLE'],
      summary: 'Create an instance (status provisioning; running once its agent is ready)',
      body: clientShape(P.create.input),
      response: P.create.output,
      handler: ({ req, caller, requestId }) => {
        // Only the fields a client may set; the owner, tier and cancellation come from the token and the subscription.
        const b = jsonBody(req);
        const fields = { name: b.name as string | undefined, framework: b.framework as string, version: b.version as string | undefined };
        return slow(P.create, { ...newInstanceOwner(caller), ...fields }, requestId);
      },
    },
    {
      method: 'get',
      path: '/instance/list',
      access: 'subscriber',
      operationId: 'listInstances',
      summary: "The caller's instances",
      response: P.list.output,
      lastKnown: true,
      handler: ({ caller, requestId }) => ctx.call(P.list, { user_id: caller.user_id }, requestId),
    },
    {
      method: 'get',
      path: '/instance/status/:instanceId',
      access: 'subscriber',
      operationId: 'getInstance',
      errors: ['DOCKER_UNAVAILABLE'],
      summary: 'Status with live CPU, memory and uptime',
      response: P.get.output,
      lastKnown: true,
      handler: ({ req, caller, requestId }) => ctx.call(P.get, { user_id: caller.user_id, instance_id: id(req.params) }, requestId),
    },
    {
      method: 'post',
      path: '/instance/restart/:instanceId',
      access: 'subscriber',
      operationId: 'restartInstance',
      errors: ['INSTANCE_STATE_CONFLICT', 'PORTS_EXHAUSTED', 'DOCKER_UNAVAILABLE'],
      summary: 'Recreate the container so the agent reloads its keys',
      response: P.restart.output,
      handler: ({ req, caller, requestId }) => slow(P.restart, { user_id: caller.user_id, instance_id: id(req.params), tier: tierOf(caller) }, requestId),
    },
    {
      method: 'post',
      path: '/instance/stop/:instanceId',
      access: 'subscriber',
      operationId: 'stopInstance',
      errors: ['INSTANCE_STATE_CONFLICT', 'DOCKER_UNAVAILABLE'],
      summary: 'Stop the instance (data kept)',
      response: P.stop.output,
      handler: ({ req, caller, requestId }) => slow(P.stop, { user_id: caller.user_id, instance_id: id(req.params) }, requestId),
    },
    {
      method: 'post',
      path: '/instance/start/:instanceId',
      access: 'subscriber',
      operationId: 'startInstance',
      errors: ['INSTANCE_STATE_CONFLICT', 'PORTS_EXHAUSTED', 'DOCKER_UNAVAILABLE'],
      summary: 'Start a stopped or failed instance',
      response: P.start.output,
      handler: ({ req, caller, requestId }) => slow(P.start, { user_id: caller.user_id, instance_id: id(req.params), tier: tierOf(caller) }, requestId),
    },
    {
      method: 'post',
      path: '/instance/upgrade/:instanceId',
      access: 'subscriber',
      operationId: 'upgradeInstance',
      errors: ['UPGRADES_UNSUPPORTED', 'INSTANCE_STATE_CONFLICT', 'DOCKER_UNAVAILABLE'],
      summary: 'Move the instance to another version (data, URL and access token kept); rolls itself back if the agent is not ready on it',
      body: clientShape(P.upgrade.input.omit({ instance_id: true })),
      response: P.upgrade.output,
      handler: ({ req, caller, requestId }) => {
        const b = jsonBody(req);
        const fields = { version: b.version as string, ready_timeout_seconds: b.ready_timeout_seconds as number | undefined };
        return slow(P.upgrade, { user_id: caller.user_id, instance_id: id(req.params), tier: tierOf(caller), ...fields }, requestId);
      },
    },
    {
      method: 'delete',
      path: '/instance/delete/:instanceId',
      access: 'subscriber',
      operationId: 'deleteInstance',
      errors: ['DOCKER_UNAVAILABLE'],
      summary: 'Delete the instance, its volume, logs and keys permanently',
      response: P.remove.output,
      handler: ({ req, caller, requestId }) => slow(P.remove, { user_id: caller.user_id, instance_id: id(req.params) }, requestId),
    },
  ];
}
