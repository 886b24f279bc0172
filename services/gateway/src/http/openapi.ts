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
    ];
    (paths[path] ??= {})[e.method] = {
      summary: e.summary,
      security: SECURITY[e.access],
      ...(params.length ? { parameters: params } : {}),
      ...(e.body ? { requestBody: { required: true, content: json(e.body, 'input') } } : {}),
      responses: {
        '200': { description: 'OK', headers, ...(e.response ? { content: json(e.response, 'output', e.responseType) } : {}) },
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
