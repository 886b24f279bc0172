import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '@agenthost/testkit';

let stack: Stack;
let doc: any;
beforeAll(async () => {
  stack = await startStack({ services: ['auth'] });
  const res = await stack.api.get('/openapi.json');
  expect(res.status).toBe(200);
  doc = res.body;
});
afterAll(async () => {
  await stack?.stop();
});

/** A component schema a $ref names. */
const resolve = (s: { $ref?: string }) => (s.$ref ? doc.components.schemas[s.$ref.split('/').pop()!] : s);
const operations = () =>
  Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, m]) =>
    Object.entries(m).map(([v, op]) => ({ name: `${v.toUpperCase()} ${p}`, op })),
  );

describe('OpenAPI document', () => {
  it('describes every API route from the shared contracts, without the fields the gateway fills in', () => {
    expect(doc.openapi).toBe('3.1.0');
    const ops = operations().map((o) => o.name);
    for (const op of [
      'GET /auth/nonce',
      'POST /auth/login',
      'GET /auth/me',
      'POST /subscription/register',
      'GET /subscription/status',
      'POST /subscription/refresh',
      'GET /usage/metrics',
      'POST /instance/create',
      'GET /instance/list',
      'GET /instance/status/{instanceId}',
      'POST /instance/restart/{instanceId}',
      'POST /instance/stop/{instanceId}',
      'POST /instance/start/{instanceId}',
      'DELETE /instance/delete/{instanceId}',
      'GET /instance/logs/{instanceId}',
      'POST /keys/store',
      'PUT /keys/update',
      'DELETE /keys/delete',
      'GET /keys/list',
      'GET /keys/audit',
      'GET /keys/retrieve',
      'GET /keys/watch',
      'POST /keys/applied',
    ]) {
      expect(ops, op).toContain(op);
    }

    const create = doc.paths['/instance/create'].post;
    const body = resolve(create.requestBody.content['application/json'].schema);
    expect(Object.keys(body.properties).sort()).toEqual(['framework', 'name', 'version']);
    expect(body.required).toEqual(['framework']);
    expect(resolve(create.responses['200'].content['application/json'].schema).properties).toHaveProperty('access_token');
    expect(create.security).toEqual([{ bearer: [] }]);

    const store = resolve(doc.paths['/keys/store'].post.requestBody.content['application/json'].schema);
    expect(Object.keys(store.properties).sort()).toEqual(['instance_id', 'keys']);
    expect(doc.paths['/keys/retrieve'].get.security).toEqual([{ instanceId: [], instanceSecret: [] }]);
    // Every key change says whether the running instance took it.
    for (const [p, m] of [
      ['/keys/store', 'post'],
      ['/keys/update', 'put'],
      ['/keys/delete', 'delete'],
    ] as const) {
      const out = resolve(doc.paths[p][m].responses['200'].content['application/json'].schema);
      expect(out.properties, p).toHaveProperty('applied');
      expect(out.properties, p).toHaveProperty('reason');
      expect(out.required, p).toContain('applied');
    }
    expect(doc.paths['/keys/watch'].get.responses['200'].content).toHaveProperty('text/event-stream');
    expect(doc.paths['/auth/nonce'].get.parameters).toEqual([expect.objectContaining({ name: 'wallet_address', in: 'query', required: true })]);
    expect(doc.paths['/instance/status/{instanceId}'].get.parameters[0]).toMatchObject({ name: 'instanceId', in: 'path', required: true });
  });

  it('asks register for the tier as well as the signature (a generated client could not register without it)', () => {
    const body = resolve(doc.paths['/subscription/register'].post.requestBody.content['application/json'].schema);
    expect(body.required.sort()).toEqual(['tier', 'tx_signature']);
    expect(body.properties.tier.anyOf.map((t: { const: number }) => t.const)).toEqual([0, 1, 2]);
    expect(body.properties.tx_signature.pattern).toBe('^[1-9A-HJ-NP-Za-km-z]{64,88}$');
  });

  it("says which fields login needs: our message's three, or the wallet-built message, its signer and signature", () => {
    const body = resolve(doc.paths['/auth/login'].post.requestBody.content['application/json'].schema);
    expect(body.anyOf[0]).toEqual({ required: ['wallet_address', 'signature_base58', 'nonce'] });
    expect(body.anyOf[1].allOf).toHaveLength(3);
  });

  it('names every operation once, in camelCase, so generated clients get stable method names', () => {
    const ids = operations().map((o) => o.op.operationId as string);
    expect(
      ids.every((id) => /^[a-z][A-Za-z0-9]*$/.test(id)),
      ids.join(),
    ).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.paths['/subscription/register'].post.operationId).toBe('registerSubscription');
  });

  it('lists the error codes each operation can answer, under their status', () => {
    const codes = (p: string, m: string, status: string) => doc.paths[p][m].responses[status]?.content['application/json'].schema.properties.code.enum;
    expect(codes('/auth/me', 'get', '401')).toEqual(['UNAUTHORIZED']);
    expect(codes('/usage/metrics', 'get', '402')).toEqual(['SUBSCRIPTION_REQUIRED']);
    expect(codes('/auth/nonce', 'get', '429')).toEqual(['RATE_LIMITED']);
    expect(codes('/auth/nonce', 'get', '400')).toEqual(['VALIDATION_FAILED']);
    expect(codes('/instance/status/{instanceId}', 'get', '404')).toEqual(['INSTANCE_NOT_FOUND']);
    expect(codes('/subscription/register', 'post', '400')).toEqual(expect.arrayContaining(['INVALID_TIER', 'TX_ALREADY_USED', 'VALIDATION_FAILED']));
    expect(doc.paths['/auth/nonce'].get.responses['429'].headers).toHaveProperty('Retry-After');
    for (const { name, op } of operations())
      expect(
        Object.keys(op.responses).some((s) => /^4\d\d$/.test(s)),
        name,
      ).toBe(true);
  });

  it('gives times as date-time and wallet addresses as base58', () => {
    const status = doc.components.schemas.GetSubscriptionResponse;
    expect(status.properties.expires_at).toMatchObject({ type: 'string', format: 'date-time' });
    expect(status.properties.wallet_address.pattern).toBe('^[1-9A-HJ-NP-Za-km-z]{32,44}$');
    expect(doc.components.schemas.LoginResponse.properties.user_id.format).toBe('uuid');
    // The document's license is the one every package.json states (proprietary: UNLICENSED).
    const pkg = JSON.parse(readFileSync(fileURLToPath(new URL('../../../package.json', import.meta.url)), 'utf8'));
    expect(pkg.license).toBe('UNLICENSED');
    expect(doc.info.license).toEqual({ name: expect.stringContaining(pkg.license), identifier: 'LicenseRef-agenthost-proprietary' });
  });

  it("passes Redocly's recommended ruleset with no warning", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'openapi-'));
    try {
      const file = join(dir, 'openapi.json');
      await writeFile(file, JSON.stringify(doc));
      const redocly = fileURLToPath(new URL('../node_modules/.bin/redocly', import.meta.url));
      const run = await promisify(execFile)(redocly, ['lint', '--format=json', file], {
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      }).catch((err: { stdout: string }) => err);
      const report = JSON.parse(run.stdout) as { totals: { errors: number; warnings: number }; problems: unknown[] };
      expect(report.problems).toEqual([]);
      expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('describes wait, the event stream and Idempotency-Key', () => {
    const wait = doc.paths['/instance/wait/{instanceId}'].get;
    expect(wait.parameters.map((p: { name: string }) => p.name)).toEqual(['instanceId', 'state', 'timeout']);
    expect(wait.parameters[1].schema.enum).toEqual(['running', 'stopped', 'sleeping', 'deleted']);
    const events = doc.paths['/instance/events/{instanceId}'].get;
    expect(events.responses['200'].content).toHaveProperty('text/event-stream');
    expect(events.parameters).toContainEqual(expect.objectContaining({ name: 'Last-Event-ID', in: 'header' }));
    // Every POST and DELETE acting for a user takes a key; the public ones (sign-in) do not.
    for (const [p, m] of [
      ['/instance/create', 'post'],
      ['/instance/delete/{instanceId}', 'delete'],
      ['/keys/store', 'post'],
    ] as const) {
      expect(doc.paths[p][m].parameters, p).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false }));
      expect(doc.paths[p][m].responses['200'].headers, p).toHaveProperty('Idempotency-Replayed');
    }
    expect(doc.paths['/auth/login'].post.parameters ?? []).not.toContainEqual(expect.objectContaining({ name: 'Idempotency-Key' }));
  });
});
