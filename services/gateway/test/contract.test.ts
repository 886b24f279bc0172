import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainClient, signIn, startStack, type ApiClient, type Stack } from '@agenthost/testkit';
import { apiRoutes } from '../src/http/routes/index.ts';
import { cases, type Actors } from './contract/cases.ts';
import { documentValidator } from './contract/validator.ts';

// The OpenAPI document against the live gateway: every operation gets a request a client generated from the document
// would send, and every answer (success or error) must be one the document describes. A route added, removed or
// changed without the document following fails here.

let stack: Stack;
let doc: any;
let actors: Actors;
beforeAll(async () => {
  // WEBHOOK_ALLOW_HOSTS: webhook endpoints on localhost are accepted (nothing is delivered in this suite).
  stack = await startStack({ services: ['auth', 'billing-chain', 'keyvault'], devchain: true, serviceEnv: { gateway: { WEBHOOK_ALLOW_HOSTS: 'localhost' } } });
  doc = (await stack.api.get('/openapi.json')).body;
  const user = await signIn(stack.api);
  const subscriber = await signIn(stack.api);
  const chain = chainClient(stack);
  await chain.airdrop(subscriber.wallet.address, 5_000_000_000);
  const sent = await chain.subscribe(subscriber.wallet, 'pro');
  expect(sent.err).toBeNull();
  actors = { user, subscriber, tx_signature: sent.signature, anyone: stack.api };
}, 120_000);
afterAll(async () => {
  await stack?.stop();
});

const path = (p: string) => p.replace(/:([A-Za-z]+)/g, '{$1}');

describe('the OpenAPI document against the live gateway', () => {
  it('documents every route the gateway mounts, and the gateway serves every documented operation', async () => {
    const documented = documentValidator(doc).operations.map((o) => `${o.method.toUpperCase()} ${o.path}`).sort();
    // The route table mount.ts mounts in full; the handlers are not called here, so they need no context.
    const mounted = apiRoutes({ config: {} } as never).filter((r) => !r.internal).map((r) => `${r.method.toUpperCase()} ${path(r.path)}`).sort();
    expect(documented).toEqual(mounted);
    for (const o of documentValidator(doc).operations) {
      const res = await stack.api.raw('OPTIONS', o.path.replace(/\{instanceId\}/, 'contract-agent').replace(/\{backupId\}/, 'bk-0123456789abcdef0123').replace(/\{webhookId\}/, 'wh_0123456789abcdef0123').replace(/\{deliveryId\}/, 'msg_0123456789abcdef0123'), undefined, {});
      expect(res.headers.get('allow')?.split(', '), `${o.method} ${o.path}`).toContain(o.method.toUpperCase());
    }
  });

  it('accepts a documented request for every operation, and every answer is one the document describes', async () => {
    const v = documentValidator(doc);
    const all = await cases(actors);
    const byId = new Map(v.operations.map((o) => [o.operationId, o]));
    const problems: string[] = [];
    for (const c of all) {
      const o = byId.get(c.operationId);
      if (!o) {
        problems.push(`${c.operationId}: not in the document`);
        continue;
      }
      const name = `${c.operationId} (${c.why})`;
      if (c.documented) problems.push(...v.query(o, c.path).map((p) => `${name}: ${p}`));
      if (c.documented && c.body !== undefined) problems.push(...v.body(o, c.body).map((p) => `${name}: the request body is not documented: ${p}`));
      const client: ApiClient = c.as === 'anyone' ? actors.anyone : actors[c.as].api;
      const body = c.body === undefined ? undefined : JSON.stringify(c.body);
      const res = await client.raw(o.method.toUpperCase(), c.path, body, { ...(body ? { 'content-type': 'application/json' } : {}), ...c.headers });
      if (c.documented && res.body?.code === 'VALIDATION_FAILED') problems.push(`${name}: a documented request was refused: ${res.text}`);
      if (res.status !== c.status) problems.push(`${name}: ${res.status} instead of ${c.status}: ${res.text.slice(0, 300)}`);
      problems.push(...v.answer(o, res).map((p) => `${name}: ${p}`));
    }
    expect(problems).toEqual([]);
    // Every operation was shown to accept what the document describes.
    const accepted = new Set(all.filter((c) => c.documented).map((c) => c.operationId));
    expect(v.operations.map((o) => o.operationId).filter((id) => !accepted.has(id))).toEqual([]);
  }, 120_000);
});
