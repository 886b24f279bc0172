import { contracts, parseOr400, seal } from '@agenthost/shared';
import type { z } from 'zod';
import type { GatewayContext } from '../../context.ts';
import { clientShape } from '../openapi.ts';
import { jsonBody, queryString, type Route } from '../route.ts';
import { instanceHeader as header } from './key-watch.ts';

const kv = contracts.keyvault;
const applied = contracts.keys.applyResult.shape;

/**
 * Bring-your-own keys (spec §4.11-4.14). Key values are sealed to keyvault's public key here, so they
 * never cross the bus in plaintext; only keyvault opens them. Owner routes are subscriber routes; the user id always
 * comes from the token, never from the body. /keys/retrieve is the instance's: it authenticates with
 * X-Instance-ID / X-Instance-Secret in keyvault (which counts and rate limits failures) and is not
 * counted against the owner's quota. A change is handed to the running instance, which reloads its keys without a
 * restart; the answer says whether it did (`applied`, with a `reason` when not), after at most KEYS_APPLY_WAIT_MS.
 */
export const keysRoutes = (ctx: GatewayContext): Route[] => [
  {
    method: 'post',
    path: '/keys/store',
    access: 'subscriber',
    operationId: 'storeKeys',
    errors: ['INSTANCE_NOT_FOUND', 'KEY_LIMIT_EXCEEDED'],
    summary: 'Store provider keys for an instance (encrypted on receipt; the running instance reloads them)',
    body: kv.storeBody,
    response: kv.store.output.extend(applied),
    handler: async ({ req, requestId, caller, meta }) => {
      const b = parseOr400(kv.storeBody, jsonBody(req));
      const sealed_keys = seal(JSON.stringify(b.keys), ctx.keyvaultSealKey, kv.sealContext(kv.store.subject, b.instance_id));
      const out = await ctx.call(kv.store, { user_id: caller.user_id, instance_id: b.instance_id, sealed_keys, meta }, requestId);
      return {
        ...out,
        ...(await ctx.keyReload.apply({ user_id: caller.user_id, instance_id: out.instance_id, action: 'stored', key_names: Object.keys(b.keys) })),
      };
    },
  },
  {
    method: 'put',
    path: '/keys/update',
    access: 'subscriber',
    operationId: 'updateKey',
    errors: ['INSTANCE_NOT_FOUND', 'KEY_NOT_FOUND'],
    summary: 'Replace one key (the running instance reloads it; restart_required when it could not)',
    body: kv.updateBody,
    response: kv.update.output.extend(applied),
    handler: async ({ req, requestId, caller, meta }) => {
      const b = parseOr400(kv.updateBody, jsonBody(req));
      const sealed_value = seal(b.key_value, ctx.keyvaultSealKey, kv.sealContext(kv.update.subject, b.instance_id, b.key_name));
      const out = await ctx.call(kv.update, { user_id: caller.user_id, instance_id: b.instance_id, key_name: b.key_name, sealed_value, meta }, requestId);
      const result = await ctx.keyReload.apply({ user_id: caller.user_id, instance_id: out.instance_id, action: 'updated', key_names: [out.key_name] });
      return { ...out, restart_required: !result.applied, ...result };
    },
  },
  {
    method: 'delete',
    path: '/keys/delete',
    access: 'subscriber',
    operationId: 'deleteKeys',
    errors: ['INSTANCE_NOT_FOUND'],
    summary: 'Delete keys of an instance (the running instance reloads its keys)',
    body: clientShape(kv.remove.input),
    response: kv.remove.output.extend(applied),
    handler: async ({ req, requestId, caller, meta }) => {
      const b = jsonBody(req);
      const out = await ctx.call(
        kv.remove,
        { user_id: caller.user_id, instance_id: b.instance_id as string, key_names: b.key_names as string[], meta },
        requestId,
      );
      return {
        ...out,
        ...(await ctx.keyReload.apply({ user_id: caller.user_id, instance_id: out.instance_id, action: 'deleted', key_names: b.key_names as string[] })),
      };
    },
  },
  {
    method: 'get',
    path: '/keys/list',
    access: 'subscriber',
    operationId: 'listKeys',
    errors: ['INSTANCE_NOT_FOUND'],
    summary: "Names (never values) of an instance's keys",
    query: clientShape(kv.list.input) as z.ZodObject,
    response: kv.list.output,
    handler: ({ req, requestId, caller, meta }) =>
      ctx.call(kv.list, { user_id: caller.user_id, instance_id: queryString(req, 'instance_id') as string, meta }, requestId),
  },
  {
    method: 'get',
    path: '/keys/audit',
    access: 'subscriber',
    operationId: 'listKeyAudit',
    errors: ['INSTANCE_NOT_FOUND'],
    summary: "Audit records of an instance's keys",
    query: clientShape(kv.audit.input) as z.ZodObject,
    response: kv.audit.output,
    handler: ({ req, requestId, caller, meta }) => {
      const limit = queryString(req, 'limit');
      return ctx.call(
        kv.audit,
        { user_id: caller.user_id, instance_id: queryString(req, 'instance_id') as string, ...(limit === undefined ? {} : { limit }), meta },
        requestId,
      );
    },
  },
  {
    method: 'get',
    path: '/keys/retrieve',
    access: 'instance',
    operationId: 'retrieveKeys',
    summary: "The instance's keys, sealed for it (instance credentials)",
    response: kv.retrieve.output,
    handler: ({ req, res, requestId, meta }) => {
      res.setHeader('Cache-Control', 'no-store');
      return ctx.call(kv.retrieve, { instance_id: header(req, 'x-instance-id', 100), instance_secret: header(req, 'x-instance-secret', 200), meta }, requestId);
    },
  },
];
