import { z } from 'zod';
import { contracts, ERROR_CODES } from '@agenthost/shared';
import { byStatus, errorCodes, idempotent } from './openapi-errors.ts';
import type { Access, Route } from './route.ts';

/**
 * Fields the gateway fills in from the token or the subscription when it calls a backend (create and clone take the
 * tier from the subscription). A route whose client sends one of them (register sends `tier`) writes its own body
 * schema instead of using clientShape.
 */
const SERVER_FIELDS = ['user_id', 'wallet_address', 'tier', 'subscription_cancelled', 'meta'] as const;

/** A backend contract's input as a client sends it: without the fields the gateway fills in. */
export function clientShape(schema: z.ZodType): z.ZodType {
  if (!(schema instanceof z.ZodObject)) return schema;
  const present = SERVER_FIELDS.filter((k) => k in schema.shape);
  const mask = Object.fromEntries(present.map((k) => [k, true])) as Record<string, true> & Record<number, never>;
  return present.length ? schema.omit(mask) : schema;
}

const SECURITY: Record<Access, Array<Record<string, string[]>>> = {
  public: [],
  token: [{ bearer: [] }],
  user: [{ bearer: [] }],
  subscriber: [{ bearer: [] }],
  instance: [{ instanceId: [], instanceSecret: [] }],
};

const HEADERS = {
  'X-Request-ID': { description: 'the request id (the client’s X-Request-ID when it is 8-100 safe characters)', schema: { type: 'string' } },
  'X-Subscription-Tier': { description: 'free, pro, enterprise or none', schema: { type: 'string', enum: ['free', 'pro', 'enterprise', 'none'] } },
  'X-Subscription-Expires': { description: 'ISO 8601, or none', schema: { type: 'string' } },
  'X-Usage-Remaining': { description: 'requests left today; -1 = unlimited', schema: { type: 'integer' } },
};
const RETRY_AFTER = { 'Retry-After': { description: 'seconds until a retry may succeed', schema: { type: 'integer' } } };

/** What a path parameter holds (its backend refuses anything else with 400 VALIDATION_FAILED). */
const PATH_PARAMS: Record<string, z.ZodType> = {
  instanceId: contracts.instanceId,
  backupId: contracts.provisioner.backupId,
  webhookId: contracts.webhooks.webhookId,
  deliveryId: contracts.webhooks.deliveryId,
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const pascal = (id: string) => id[0]!.toUpperCase() + id.slice(1);

/** A zod schema as a JSON Schema (2020-12, what OpenAPI 3.1 uses) without the $schema marker. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}

const IDEMPOTENCY_KEY = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    '1 to 255 printable ASCII characters (400 VALIDATION_FAILED otherwise). The first answer is kept 24 h and replayed (Idempotency-Replayed: true) to a retry with the same key and request; another request with the key is 422 IDEMPOTENCY_KEY_REUSED; while the first is in flight duplicates wait for its answer (409 IDEMPOTENCY_KEY_IN_FLIGHT after 30 s, or at once when its gateway died and the outcome is unknown)',
  // The gateway's own check (http/idempotency.ts): printable ASCII, no space.
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
};

/**
 * The OpenAPI 3.1 document of the routes (those not marked internal), in their order. Bodies and answers are named
 * component schemas (<OperationId>Request, <OperationId>Response, Error); every error status lists its codes.
 */
export function openApiDocument(routes: Route[]): Record<string, unknown> {
  const schemas: Record<string, unknown> = { Error: jsonSchema(contracts.api.errorBody, 'output') };
  const named = (name: string, schema: z.ZodType, io: 'input' | 'output') => {
    if (name in schemas) throw new Error(`OpenAPI: two schemas named ${name}`);
    schemas[name] = jsonSchema(schema, io);
    return ref(name);
  };
  const paths: Record<string, Record<string, unknown>> = {};
  for (const e of routes.filter((r) => !r.internal)) {
    const id = e.operationId;
    if (!id || !/^[a-z][A-Za-z0-9]*$/.test(id)) throw new Error(`OpenAPI: ${e.method.toUpperCase()} ${e.path} needs a camelCase operationId`);
    const path = e.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const params = [
      ...[...e.path.matchAll(/:([A-Za-z]+)/g)].map((m) => ({
        name: m[1],
        in: 'path',
        required: true,
        schema: jsonSchema(PATH_PARAMS[m[1]!] ?? z.string(), 'input'),
      })),
      ...Object.entries(e.query?.shape ?? {}).map(([name, s]) => ({
        name,
        in: 'query',
        required: !(s as z.ZodType).safeParse(undefined).success,
        schema: jsonSchema(s as z.ZodType, 'input'),
      })),
      ...Object.entries(e.requestHeaders ?? {}).map(([name, description]) => ({
        name,
        in: 'header',
        required: false,
        description,
        schema: { type: 'string' },
      })),
      ...(idempotent(e) ? [IDEMPOTENCY_KEY] : []),
    ];
    const content = e.response
      ? {
          [e.responseType ?? 'application/json']: { schema: named(`${pascal(id)}Response`, e.response, 'output') },
          ...(e.stream ? { 'text/event-stream': { schema: named(`${pascal(id)}Event`, e.stream, 'output') } } : {}),
        }
      : undefined;
    const answerHeaders = idempotent(e)
      ? {
          ...HEADERS,
          'Idempotency-Replayed': {
            required: false,
            schema: { type: 'string', enum: ['true'] },
            description: 'present on a replay of the first answer to the Idempotency-Key',
          },
        }
      : HEADERS;
    (paths[path] ??= {})[e.method] = {
      operationId: id,
      summary: e.summary,
      security: SECURITY[e.access],
      ...(params.length ? { parameters: params } : {}),
      ...(e.body ? { requestBody: { required: true, content: { 'application/json': { schema: named(`${pascal(id)}Request`, e.body, 'input') } } } } : {}),
      responses: {
        '200': { description: 'OK', headers: answerHeaders, ...(content ? { content } : {}) },
        ...errorResponses(e),
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'agenthost API',
      version: '1.0.0',
      description: 'Run your own AI agents in hardened containers, paid with an on-chain subscription.',
      // Proprietary, as every package.json says ("license": "UNLICENSED"): no license is granted.
      license: { name: 'UNLICENSED (proprietary, all rights reserved)', identifier: 'LicenseRef-agenthost-proprietary' },
    },
    servers: [{ url: '/api' }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT (EdDSA)' },
        instanceId: { type: 'apiKey', in: 'header', name: 'X-Instance-ID' },
        instanceSecret: { type: 'apiKey', in: 'header', name: 'X-Instance-Secret' },
      },
      schemas,
    },
    paths,
  };
}

/** One response per error status, its body the Error schema narrowed to that status and the codes the operation can give. */
function errorResponses(route: Route): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [status, codes] of byStatus(errorCodes(route))) {
    const retry = codes.some((c) => c === 'RATE_LIMITED' || c === 'IDEMPOTENCY_KEY_IN_FLIGHT') || status === 503;
    out[String(status)] = {
      description:
        codes.map((c) => `${c}: ${ERROR_CODES[c].message}`).join('; ') + (route.rateLimit && codes.includes('RATE_LIMITED') ? ` (${route.rateLimit})` : ''),
      headers: { ...HEADERS, ...(retry ? RETRY_AFTER : {}) },
      content: {
        'application/json': {
          schema: { allOf: [ref('Error')], properties: { code: { type: 'string', enum: codes }, status: { type: 'integer', const: status } } },
        },
      },
    };
  }
  return out;
}
