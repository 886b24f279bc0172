import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '@agenthost/testkit';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ services: ['auth'] });
});
afterAll(async () => {
  await stack?.stop();
});

describe('OpenAPI document', () => {
  it('describes every API route from the shared contracts, without the fields the gateway fills in', async () => {
    const res = await stack.api.get('/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toBe('3.1.0');
    const ops = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([p, m]) => Object.keys(m).map((v) => `${v.toUpperCase()} ${p}`));
    for (const op of [
      'GET /auth/nonce', 'POST /auth/login', 'GET /auth/me',
      'POST /subscription/register', 'GET /subscription/status', 'POST /subscription/refresh', 'GET /usage/metrics',
      'POST /instance/create', 'GET /instance/list', 'GET /instance/status/{instanceId}', 'POST /instance/restart/{instanceId}',
      'POST /instance/stop/{instanceId}', 'POST /instance/start/{instanceId}', 'DELETE /instance/delete/{instanceId}', 'GET /instance/logs/{instanceId}',
      'POST /keys/store', 'PUT /keys/update', 'DELETE /keys/delete', 'GET /keys/list', 'GET /keys/audit', 'GET /keys/retrieve',
      'GET /keys/watch', 'POST /keys/applied',
    ]) {
      expect(ops, op).toContain(op);
    }

    const create = doc.paths['/instance/create'].post;
    const body = create.requestBody.content['application/json'].schema;
    expect(Object.keys(body.properties).sort()).toEqual(['framework', 'name', 'version']);
    expect(body.required).toEqual(['framework']);
    expect(create.responses['200'].content['application/json'].schema.properties).toHaveProperty('access_token');
    expect(create.security).toEqual([{ bearer: [] }]);
    expect(create.responses.default.content['application/json'].schema.required).toEqual(['error', 'code', 'status']);

    const store = doc.paths['/keys/store'].post.requestBody.content['application/json'].schema;
    expect(Object.keys(store.properties).sort()).toEqual(['instance_id', 'keys']);
    expect(doc.paths['/keys/retrieve'].get.security).toEqual([{ instanceId: [], instanceSecret: [] }]);
    // Every key change says whether the running instance took it.
    for (const [p, m] of [['/keys/store', 'post'], ['/keys/update', 'put'], ['/keys/delete', 'delete']] as const) {
      const out = doc.paths[p][m].responses['200'].content['application/json'].schema;
      expect(out.properties, p).toHaveProperty('applied');
      expect(out.properties, p).toHaveProperty('reason');
      expect(out.required, p).toContain('applied');
    }
    expect(doc.paths['/keys/watch'].get.responses['200'].content).toHaveProperty('text/event-stream');
    expect(doc.paths['/auth/nonce'].get.parameters).toEqual([expect.objectContaining({ name: 'wallet_address', in: 'query', required: true })]);
    expect(doc.paths['/instance/status/{instanceId}'].get.parameters[0]).toMatchObject({ name: 'instanceId', in: 'path', required: true });
  });

  it('describes wait, the event stream and Idempotency-Key', async () => {
    const doc = (await stack.api.get('/openapi.json')).body;
    const wait = doc.paths['/instance/wait/{instanceId}'].get;
    expect(wait.parameters.map((p: { name: string }) => p.name)).toEqual(['instanceId', 'state', 'timeout']);
    expect(wait.parameters[1].schema.enum).toEqual(['running', 'stopped', 'deleted']);
    const events = doc.paths['/instance/events/{instanceId}'].get;
    expect(events.responses['200'].content).toHaveProperty('text/event-stream');
    expect(events.parameters).toContainEqual(expect.objectContaining({ name: 'Last-Event-ID', in: 'header' }));
    // Every POST and DELETE acting for a user takes a key; the public ones (sign-in) do not.
    for (const [p, m] of [['/instance/create', 'post'], ['/instance/delete/{instanceId}', 'delete'], ['/keys/store', 'post']] as const) {
      expect(doc.paths[p][m].parameters, p).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false }));
      expect(doc.paths[p][m].responses['200'].headers, p).toHaveProperty('Idempotency-Replayed');
    }
    expect(doc.paths['/auth/login'].post.parameters ?? []).not.toContainEqual(expect.objectContaining({ name: 'Idempotency-Key' }));
  });
});
