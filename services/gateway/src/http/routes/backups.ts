import { contracts } from '@agenthost/shared';
import { z } from 'zod';
import type { GatewayContext } from '../../context.ts';
import { clientShape } from '../openapi.ts';
import { jsonBody, type Route } from '../route.ts';
import { instanceId as id, newInstanceOwner, slowCall, tierOf } from './instances.ts';

const P = contracts.provisioner;

/** Backups of an instance's data (docker driver). A backup or restore pauses or recreates the container: the slow timeout. */
export function backupRoutes(ctx: GatewayContext): Route[] {
  const slow = slowCall(ctx);
  return [
    {
      method: 'post',
      path: '/instance/backup/:instanceId',
      access: 'subscriber',
      operationId: 'createBackup',
      errors: ['BACKUPS_UNSUPPORTED', 'INSTANCE_STATE_CONFLICT', 'STORAGE_LIMIT_EXCEEDED', 'DOCKER_UNAVAILABLE'],
      summary: "Back up the instance's data now (the agent is paused for the copy)",
      response: P.backup.output,
      handler: ({ req, caller, requestId }) => slow(P.backup, { user_id: caller.user_id, instance_id: id(req.params), tier: tierOf(caller) }, requestId),
    },
    {
      method: 'get',
      path: '/instance/backups/:instanceId',
      access: 'subscriber',
      operationId: 'listBackups',
      errors: ['BACKUPS_UNSUPPORTED'],
      summary: 'The backups of an instance, newest first (also of a deleted one)',
      response: P.backups.output,
      handler: ({ req, caller, requestId }) => ctx.call(P.backups, { user_id: caller.user_id, instance_id: id(req.params) }, requestId),
    },
    {
      method: 'post',
      path: '/instance/restore/:instanceId',
      access: 'subscriber',
      operationId: 'restoreBackup',
      errors: ['BACKUPS_UNSUPPORTED', 'BACKUP_NOT_FOUND', 'BACKUP_CORRUPT', 'INSTANCE_STATE_CONFLICT', 'PORTS_EXHAUSTED', 'DOCKER_UNAVAILABLE'],
      summary: "Replace the instance's data with a backup's and restart it; returns a new access token, once",
      body: z.object({ backup_id: P.backupId }),
      response: P.restore.output,
      handler: ({ req, caller, requestId }) =>
        slow(
          P.restore,
          { user_id: caller.user_id, instance_id: id(req.params), backup_id: jsonBody(req).backup_id as string, tier: tierOf(caller) },
          requestId,
        ),
    },
    {
      method: 'post',
      path: '/instance/clone/:instanceId',
      access: 'subscriber',
      operationId: 'cloneInstance',
      errors: [
        'BACKUPS_UNSUPPORTED',
        'BACKUP_NOT_FOUND',
        'BACKUP_CORRUPT',
        'INSTANCE_LIMIT_EXCEEDED',
        'STORAGE_LIMIT_EXCEEDED',
        'SUBSCRIPTION_CANCELLED',
        'PORTS_EXHAUSTED',
        'CONFLICT',
        'DOCKER_UNAVAILABLE',
      ],
      summary: 'A new instance holding a backup of this instance (which may be deleted); counts like a create',
      body: clientShape(P.clone.input.omit({ instance_id: true })),
      response: P.clone.output,
      handler: ({ req, caller, requestId }) => {
        // Only the fields a client may set; the owner, tier and cancellation come from the token and the subscription.
        const b = jsonBody(req);
        const fields = { instance_id: id(req.params), backup_id: b.backup_id as string, name: b.name as string | undefined };
        return slow(P.clone, { ...newInstanceOwner(caller), ...fields }, requestId);
      },
    },
    {
      method: 'delete',
      path: '/instance/backup/:instanceId/:backupId',
      access: 'subscriber',
      operationId: 'deleteBackup',
      errors: ['BACKUPS_UNSUPPORTED', 'BACKUP_NOT_FOUND'],
      summary: 'Delete one backup of an instance',
      response: P.removeBackup.output,
      handler: ({ req, caller, requestId }) =>
        ctx.call(P.removeBackup, { user_id: caller.user_id, instance_id: id(req.params), backup_id: String(req.params.backupId) }, requestId),
    },
  ];
}
