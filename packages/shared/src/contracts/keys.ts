import { z } from 'zod';
import { event } from './contract.ts';
import { instanceId, isoTime, uuid } from './common.ts';
import { keyName } from './keyvault.ts';

// Key hot reload: a running instance learns that its keys changed and reloads them without a restart.
// The instance's bootstrap holds a watch (GET /keys/watch, server-sent events) open on some gateway replica;
// the replica that changed the keys reaches it over NATS, and the bootstrap's answer comes back the same way.

/**
 * Gateway replicas only. The replica holding an instance's watch subscribes to this subject (suffixed with the
 * instance id) while the watch is open; no responder means the instance's bootstrap is not connected.
 */
export const RELOAD_SUBJECT_PREFIX = 'gateway.keys.reload';
/** Gateway replicas only: the bootstrap's result, published by whichever replica received POST /keys/applied. */
export const APPLIED_SUBJECT_PREFIX = 'gateway.keys.applied';
export const reloadSubject = (id: string): string => `${RELOAD_SUBJECT_PREFIX}.${id}`;
export const appliedSubject = (id: string): string => `${APPLIED_SUBJECT_PREFIX}.${id}`;

/**
 * change_id is 128 random bits made by the replica that changed the keys: it reaches only the instance's own
 * (authenticated) watch, so an answer that carries it can only come from that instance.
 */
export const changeId = z.string().regex(/^[A-Za-z0-9_-]{22,64}$/);
export const reloadRequest = z.object({ change_id: changeId });
export const reloadDelivered = z.object({ delivered: z.boolean() });

/** POST /keys/applied: the bootstrap's result of one change (reason is short, plain text, never a value). */
export const appliedReport = z.object({
  instance_id: instanceId,
  change_id: changeId,
  applied: z.boolean(),
  reason: z.string().max(300).optional(),
});

/** What every key change answers besides its own fields: did the running instance take it? */
export const applyResult = z.object({
  applied: z.boolean().describe('true when the running instance reloaded its keys (no restart needed)'),
  reason: z.string().optional().describe('why the change was not applied, e.g. "instance not running"'),
});

/** One key change and its outcome in the instance (names only, never values). */
export const keysChanged = event(
  'events.keys.changed',
  z.object({
    instance_id: instanceId,
    user_id: uuid,
    action: z.enum(['stored', 'updated', 'deleted']),
    key_names: z.array(keyName),
    applied: z.boolean(),
    reason: z.string().optional(),
    at: isoTime,
  }),
);
