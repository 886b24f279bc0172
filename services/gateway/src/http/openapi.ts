import { z } from 'zod';
import { contracts } from '@agenthost/shared';
import type { Access, Route } from './route.ts';

/** Fields the gateway fills in from the token or the subscription; a client never sends them. */
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

const json = (schema: z.ZodType, io: 'input' | 'output', type = 'application/json') => ({ [type]: { schema: z.toJSONSchema(schema, { io, unrepresentable: 'any' }) } });

/** Every POST and DELETE acting for a user takes an Idempotency-Key (http/idempotency.ts). */
const idempotent = (r: Route) => (r.method === 'post' || r.method === 'delete') && r.access !== 'public' && r.access !== 'instance';

const IDEMPOTENCY_KEY = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Up to 255 printable characters. The first answer is kept 24 h and replayed (Idempotency-Replayed: true) to a retry with the same key and request; another request with the key is 422 IDEMPOTENCY_KEY_REUSED; while the first is in flight duplicates wait for its answer (409 IDEMPOTENCY_KEY_IN_FLIGHT after 30 s, or at once when its gateway died and the outcome is unknown)',
  schema: { type: 'string', maxLength: 255 },
};

/** The OpenAPI 3.1 document of the routes (those not marked internal), in their order. */
export function openApiDocument(routes: Route[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const headers = {
    'X-Request-ID': { schema: { type: 'string' } },
    'X-Subscription-Tier': { schema: { type: 'string' }, description: 'free, pro, enterprise or none' },
    'X-Subscription-Expires': { schema: { type: 'string' }, description: 'ISO 8601, or none' },
    'X-Usage-Remaining': { schema: { type: 'integer' }, description: 'requests left today; -1 = unlimited' },
  };
  for (const e of routes.filter((r) => !r.internal)) {
    const path = e.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const params = [
      ...[...e.path.matchAll(/:([A-Za-z]+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } })),
      ...Object.entries(e.query?.shape ?? {}).map(([name, s]) => ({
        name,
        in: 'query',
        required: !(s as z.ZodType).safeParse(undefined).success,
        schema: z.toJSONSchema(s as z.ZodType, { io: 'input', unrepresentable: 'any' }),
      })),
      ...Object.entries(e.requestHeaders ?? {}).map(([name, description]) => ({ name, in: 'header', required: false, description, schema: { type: 'string' } })),
      ...(idempotent(e) ? [IDEMPOTENCY_KEY] : []),
    ];
    const answerHeaders = idempotent(e) ? { ...headers, 'Idempotency-Replayed': { schema: { type: 'string', enum: ['true'] }, description: 'present on a replay of the first answer to the Idempotency-Key' } } : headers;
    (paths[path] ??= {})[e.method] = {
      summary: e.summary,
      security: SECURITY[e.access],
      ...(params.length ? { parameters: params } : {}),
      ...(e.body ? { requestBody: { required: true, content: json(e.body, 'input') } } : {}),
      responses: {
        '200': { description: 'OK', headers: answerHeaders, ...(e.response ? { content: json(e.response, 'output', e.responseType) } : {}) },
        ...(e.rateLimit
          ? {
              '429': {
                description: `RATE_LIMITED: ${e.rateLimit}`,
                headers: { ...headers, 'Retry-After': { schema: { type: 'integer' }, description: 'seconds until the limit admits the client again' } },
                content: json(contracts.api.errorBody, 'output'),
              },
            }
          : {}),
        default: { description: 'Error: see the error code table', headers, content: json(contracts.api.errorBody, 'output') },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'agenthost API', version: '1.0.0', description: 'Run your own AI agents in hardened containers, paid with an on-chain subscription.' },
    servers: [{ url: '/api' }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT (EdDSA)' },
        instanceId: { type: 'apiKey', in: 'header', name: 'X-Instance-ID' },
        instanceSecret: { type: 'apiKey', in: 'header', name: 'X-Instance-Secret' },
      },
    },
    paths,
  };
}
