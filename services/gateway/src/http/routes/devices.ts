import { contracts, request } from '@agenthost/shared';
import { z } from 'zod';
import type { GatewayContext } from '../../context.ts';
import { jsonBody, type Route } from '../route.ts';
import { instanceId as id } from './instances.ts';

const D = contracts.devices;

/** The provisioner runs the instance's own OpenClaw CLI for these (a Node start each): its bound, with a margin. */
const DEVICES_TIMEOUT_MS = 70_000;

/**
 * Device pairing of an OpenClaw instance (docker driver): OpenClaw has its owner approve each new browser that
 * opens its Control UI, even one holding the access token. These are the owner's way to do it without a shell.
 */
export function deviceRoutes(ctx: GatewayContext): Route[] {
  const call = <C extends typeof D.list | typeof D.decide>(c: C, input: z.input<C['input']>, requestId: string) =>
    request(ctx.nc, c, input, { timeoutMs: DEVICES_TIMEOUT_MS, requestId, asserter: ctx.asserter }) as Promise<z.output<C['output']>>;
  const decide = (decision: 'approve' | 'reject'): Route => ({
    method: 'post',
    path: `/instance/devices/${decision}/:instanceId`,
    access: 'subscriber',
    operationId: decision === 'approve' ? 'approveDevice' : 'rejectDevice',
    errors: ['DEVICES_UNSUPPORTED', 'DEVICE_REQUEST_NOT_FOUND', 'INSTANCE_STATE_CONFLICT', 'DOCKER_UNAVAILABLE'],
    summary:
      decision === 'approve'
        ? 'Approve a pending pairing request: that browser (or app) may then use the instance'
        : 'Reject a pending pairing request: that browser (or app) stays out',
    body: z.object({ request_id: D.decide.input.shape.request_id }),
    response: D.decide.output,
    handler: ({ req, caller, requestId }) =>
      call(D.decide, { user_id: caller.user_id, instance_id: id(req.params), request_id: jsonBody(req).request_id as string, decision }, requestId),
  });
  return [
    {
      method: 'get',
      path: '/instance/devices/:instanceId',
      access: 'subscriber',
      operationId: 'listDevices',
      errors: ['DEVICES_UNSUPPORTED', 'INSTANCE_STATE_CONFLICT', 'DOCKER_UNAVAILABLE'],
      summary: 'The browsers and apps waiting for pairing approval, and the paired ones (OpenClaw instances)',
      response: D.list.output,
      handler: ({ req, caller, requestId }) => call(D.list, { user_id: caller.user_id, instance_id: id(req.params) }, requestId),
    },
    decide('approve'),
    decide('reject'),
  ];
}
