import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from 'nats';
import pg from 'pg';
import { contracts, request } from '@agenthost/shared';
import {
  chainClient,
  recordSecret,
  signIn,
  type ApiClient,
  type ApiResponse,
  backupStore,
  type BackupStore,
  documentValidator,
  instanceStack,
} from '@agenthost/testkit';
import { apiRoutes } from '../src/http/routes/index.ts';
import { cases } from './contract/cases.ts';
import type { Actors, Live, State } from './contract/types.ts';
import { firstEvent } from './contract/first-event.ts';

// The OpenAPI document against the live gateway and every backend (the provisioner with the stand-in agent image on
// the real Docker engine): every operation gets a request a client generated from the document would send, and
// every answer (success or error) must be one the document describes. A route added, removed or changed without the
// document following fails here.

/** This file's instance host ports: a range no other test file uses. */
const PORTS: [number, number] = [19580, 19589];

let sys: Awaited<ReturnType<typeof instanceStack>>;
let store: BackupStore;
let nc: NatsConnection;
let doc: any;
let actors: Actors;
/** A live success answer of each JSON operation, kept for the drift check. */
const answered = new Map<string, ApiResponse>();
beforeAll(async () => {
  store = await backupStore('contract');
  // WEBHOOK_ALLOW_HOSTS: webhook endpoints on localhost are accepted (nothing is delivered in this suite).
  sys = await instanceStack('contract', PORTS, { WEBHOOK_ALLOW_HOSTS: 'localhost' }, store.env);
  const stack = sys.stack;
  nc = await stack.nats.connect();
  doc = (await stack.api.get('/openapi.json')).body;
  const user = await signIn(stack.api);
  const subscriber = await signIn(stack.api);
  const chain = chainClient(stack);
  await chain.airdrop(subscriber.wallet.address, 5_000_000_000);
  const sent = await chain.subscribe(subscriber.wallet, 'pro');
  expect(sent.err).toBeNull();
  const issue = async (user_id: string, instance_id: string) => {
    const c = await request(nc, contracts.keyvault.issueCredentials, { user_id, instance_id });
    recordSecret(c.instance_secret);
    recordSecret(c.instance_key);
    return c.instance_secret;
  };
  const sql = async (text: string, params: unknown[]) => {
    const admin = new pg.Client({ connectionString: stack.db.url });
    await admin.connect();
    try {
      await admin.query(text, params);
    } finally {
      await admin.end();
    }
  };
  actors = { user, subscriber, tx_signature: sent.signature, anyone: stack.api, issue, sql };
}, 240_000);
afterAll(async () => {
  await nc?.drain();
  await sys?.stop();
  await store?.remove();
});

const path = (p: string) => p.replace(/:([A-Za-z]+)/g, '{$1}');
const live = <T>(v: Live<T>, s: State): T => (typeof v === 'function' ? (v as (s: State) => T)(s) : v);

/**
 * Operations only a real OpenClaw answers with success (device pairing: the stand-in agent has none). Their errors are
 * cases here; their successes are checked against this document by services/edge/test/control-ui.e2e.test.ts.
 */
const SUCCEEDS_ELSEWHERE = new Set(['listDevices', 'approveDevice', 'rejectDevice']);

describe('the OpenAPI document against the live gateway', () => {
  it('documents every route the gateway mounts, and the gateway serves every documented operation', async () => {
    const documented = documentValidator(doc)
      .operations.map((o) => `${o.method.toUpperCase()} ${o.path}`)
      .sort();
    // The route table mount.ts mounts in full; the handlers are not called here, so they need no context.
    const mounted = apiRoutes({ config: {} } as never)
      .filter((r) => !r.internal)
      .map((r) => `${r.method.toUpperCase()} ${path(r.path)}`)
      .sort();
    expect(documented).toEqual(mounted);
    for (const o of documentValidator(doc).operations) {
      const res = await sys.stack.api.raw(
        'OPTIONS',
        o.path
          .replace(/\{instanceId\}/, 'contract-agent')
          .replace(/\{backupId\}/, 'bk-0123456789abcdef0123')
          .replace(/\{webhookId\}/, 'wh_0123456789abcdef0123')
          .replace(/\{deliveryId\}/, 'msg_0123456789abcdef0123'),
        undefined,
        {},
      );
      expect(res.headers.get('allow')?.split(', '), `${o.method} ${o.path}`).toContain(o.method.toUpperCase());
    }
  });

  it('accepts a documented request for every operation, and every answer, success or error, is one the document describes', async () => {
    const v = documentValidator(doc);
    const all = await cases(actors);
    const byId = new Map(v.operations.map((o) => [o.operationId, o]));
    const problems: string[] = [];
    const state = {} as State;
    const successes = new Set<string>();
    for (const c of all) {
      const o = byId.get(c.operationId);
      if (!o) {
        problems.push(`${c.operationId}: not in the document`);
        continue;
      }
      const name = `${c.operationId} (${c.why})`;
      const url = live(c.path, state);
      const sent = c.body === undefined ? undefined : live(c.body, state);
      if (c.documented) problems.push(...v.query(o, url).map((p) => `${name}: ${p}`));
      if (c.documented && sent !== undefined) problems.push(...v.body(o, sent).map((p) => `${name}: the request body is not documented: ${p}`));
      const client: ApiClient = c.as === 'anyone' ? actors.anyone : actors[c.as].api;
      const body = sent === undefined ? undefined : JSON.stringify(sent);
      const headers = { ...(body ? { 'content-type': 'application/json' } : {}), ...(c.headers ? live(c.headers, state) : {}) };
      const stream = v.streams(o) && c.status === 200;
      // A stream stays open: its first event is read and validated, then the client goes away.
      const res: ApiResponse = stream
        ? await firstEvent(`${sys.stack.baseUrl}${url}`, c.as === 'anyone' ? headers : { ...headers, authorization: `Bearer ${actors[c.as].token}` })
        : await client.raw(o.method.toUpperCase(), url, body, headers);
      if (c.documented && res.body?.code === 'VALIDATION_FAILED') problems.push(`${name}: a documented request was refused: ${res.text}`);
      if (res.status !== c.status) problems.push(`${name}: ${res.status} instead of ${c.status}: ${res.text.slice(0, 300)}`);
      if (c.answerCode && res.body?.code !== c.answerCode) problems.push(`${name}: code ${res.body?.code} instead of ${c.answerCode}`);
      for (const [h, value] of Object.entries(c.answerHeaders ?? {}))
        if (res.headers.get(h) !== value) problems.push(`${name}: header ${h} is ${res.headers.get(h)}, not ${value}`);
      problems.push(...(stream ? v.event(o, res) : v.answer(o, res)).map((p) => `${name}: ${p}`));
      if (res.status === c.status && res.status < 300) successes.add(c.operationId);
      if (res.status === 200 && !stream && res.body && typeof res.body === 'object') answered.set(c.operationId, res);
      if (res.status === c.status) await c.keep?.(res.body, state);
      // Ids the cases after this one need are missing after a failure: stop there rather than report their echoes.
      if (res.status !== c.status && c.keep) break;
    }
    expect(problems).toEqual([]);
    // Every operation was shown to accept what the document describes, and answered it with a documented success.
    const accepted = new Set(all.filter((c) => c.documented).map((c) => c.operationId));
    expect(v.operations.map((o) => o.operationId).filter((id) => !accepted.has(id))).toEqual([]);
    expect(v.operations.map((o) => o.operationId).filter((id) => !successes.has(id) && !SUCCEEDS_ELSEWHERE.has(id))).toEqual([]);
  }, 600_000);

  it('fails on drift: an undocumented field, a missing required field or an undocumented status in any live answer', () => {
    const v = documentValidator(doc);
    const unnoticed: string[] = [];
    for (const o of v.operations) {
      const res = answered.get(o.operationId);
      if (!res) continue;
      const required = (v.required(o) ?? [])[0];
      const drifts: Array<[string, ApiResponse]> = [
        ['an undocumented field', { ...res, body: { ...res.body, undocumented_field: 1 } }],
        ['an undocumented status', { ...res, status: 299 }],
        ...(required
          ? ([[`no ${required}`, { ...res, body: Object.fromEntries(Object.entries(res.body).filter(([k]) => k !== required)) }]] as Array<
              [string, ApiResponse]
            >)
          : []),
      ];
      for (const [what, drifted] of drifts) if (v.answer(o, drifted).length === 0) unnoticed.push(`${o.operationId}: ${what}`);
    }
    // Every JSON operation's success answer was seen live, and every drift of it is caught.
    expect(answered.size).toBeGreaterThan(25);
    expect(unnoticed).toEqual([]);
  });
});
