import type { Actors, Case } from './types.ts';

/**
 * The answers an Idempotency-Key gives, on an operation that takes one (POST /subscription/refresh, with no side
 * effect a repeat would change): a replay of the first answer, the key with another request (422), a malformed key
 * (400), and a key whose first request's gateway died mid-request (409, outcome unknown: a row the test sets to what
 * such a gateway leaves behind, unanswered and a day old).
 */
export function idempotencyCases(a: Actors): Case[] {
  const reused = `contract-${crypto.randomUUID()}`;
  const orphaned = `contract-${crypto.randomUUID()}`;
  const refresh = (why: string, key: string, status: number): Case => ({
    operationId: 'refreshSubscription',
    why,
    as: 'subscriber',
    path: '/subscription/refresh',
    headers: { 'idempotency-key': key },
    status,
    documented: true,
  });
  return [
    refresh('a first request with an Idempotency-Key', reused, 200),
    { ...refresh('the same request and key: the first answer replayed', reused, 200), answerHeaders: { 'idempotency-replayed': 'true' } },
    {
      operationId: 'registerSubscription',
      why: 'the key again with another request: 422 IDEMPOTENCY_KEY_REUSED',
      as: 'subscriber',
      path: '/subscription/register',
      body: { tx_signature: a.tx_signature, tier: 1 },
      headers: { 'idempotency-key': reused },
      status: 422,
      documented: true,
      answerCode: 'IDEMPOTENCY_KEY_REUSED',
    },
    { ...refresh('a key with a space in it', 'not a key', 400), documented: undefined, answerCode: 'VALIDATION_FAILED' },
    {
      ...refresh('a key about to be left by a dead gateway', orphaned, 200),
      keep: async () => {
        await a.sql("UPDATE gateway.idempotency_keys SET status = NULL, body = NULL, started_at = now() - interval '1 day' WHERE key = $1", [orphaned]);
      },
    },
    { ...refresh('the key of a request whose gateway died: 409 IDEMPOTENCY_KEY_IN_FLIGHT', orphaned, 409), answerCode: 'IDEMPOTENCY_KEY_IN_FLIGHT' },
  ];
}
