import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../src/http/openapi.ts';
import { apiRoutes } from '../src/http/routes/index.ts';

// The OpenAPI document as a client generator reads it, rendered from the route table with no process running: what
// it promises about the Idempotency-Key, the create's access token and the times (the live answers are held to the
// same document by contract.test.ts).

// The route table is data: its handlers are not called here, so they need no context.
const doc = openApiDocument(apiRoutes({ config: {} } as never)) as any;
const operations = Object.values(doc.paths as Record<string, Record<string, any>>).flatMap((methods) => Object.values(methods));
const schema = (s: { $ref?: string }) => (s.$ref ? doc.components.schemas[s.$ref.split('/').pop()!] : s);
const codes = (op: any, status: number): string[] => op.responses[String(status)]?.content['application/json'].schema.properties.code.enum ?? [];

describe('the OpenAPI document', () => {
  it('lists, on every operation that takes an Idempotency-Key, the key as 1-255 characters and its 400, 409 and 422 answers', () => {
    const takers = operations.filter((op) => (op.parameters ?? []).some((p: { name: string }) => p.name === 'Idempotency-Key'));
    expect(takers.length).toBeGreaterThanOrEqual(19);
    const missing = takers.flatMap((op) => {
      const key = op.parameters.find((p: { name: string }) => p.name === 'Idempotency-Key').schema;
      return [
        ...(codes(op, 422).includes('IDEMPOTENCY_KEY_REUSED') ? [] : [`${op.operationId}: 422 IDEMPOTENCY_KEY_REUSED`]),
        ...(codes(op, 409).includes('IDEMPOTENCY_KEY_IN_FLIGHT') ? [] : [`${op.operationId}: 409 IDEMPOTENCY_KEY_IN_FLIGHT`]),
        ...(codes(op, 400).includes('VALIDATION_FAILED') ? [] : [`${op.operationId}: 400 VALIDATION_FAILED`]),
        ...(op.responses['409']?.headers?.['Retry-After'] ? [] : [`${op.operationId}: Retry-After on 409`]),
        ...(key.minLength === 1 && key.maxLength === 255 && new RegExp(key.pattern).test('k-1') && !new RegExp(key.pattern).test('a b')
          ? []
          : [`${op.operationId}: Idempotency-Key of 1-255 printable characters`]),
      ];
    });
    expect(missing).toEqual([]);
  });

  it("marks the create's access_token required, and the wait's and the event stream's times as date-time", () => {
    expect(doc.components.schemas.CreateInstanceResponse.required).toContain('access_token');
    expect(doc.components.schemas.WaitForInstanceResponse.properties.at).toMatchObject({ type: 'string', format: 'date-time' });
    const current = schema(doc.components.schemas.StreamInstanceEventsResponse).anyOf.find((s: any) => /event: current/.test(s.description ?? ''));
    expect(current.properties.at).toMatchObject({ type: 'string', format: 'date-time' });
  });
});
