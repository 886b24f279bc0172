import { ERROR_CODES, type ErrorCode } from '@agenthost/shared';
import type { Access, Route } from './route.ts';

/**
 * The error codes an operation can answer: those that follow from its access, inputs and path (below), plus the
 * route's own `errors` (what its handler and backend refuse with). The OpenAPI document lists them per status, so
 * a client can switch on `code`, and the contract test fails when an answer carries a code not listed here.
 */
const BY_ACCESS: Record<Access, ErrorCode[]> = {
  public: [],
  token: ['UNAUTHORIZED'],
  // With a subscription the request is counted (daily and per-minute limits); without one, the small allowance (429).
  user: ['UNAUTHORIZED', 'DAILY_LIMIT_EXCEEDED', 'RATE_LIMITED', 'CHAIN_UNAVAILABLE'],
  subscriber: ['UNAUTHORIZED', 'SUBSCRIPTION_REQUIRED', 'DAILY_LIMIT_EXCEEDED', 'RATE_LIMITED', 'CHAIN_UNAVAILABLE'],
  // keyvault counts failed authentications and rate limits them; a key issued under a retired master key is stale.
  instance: ['INSTANCE_UNAUTHORIZED', 'RATE_LIMITED', 'INSTANCE_CREDENTIALS_STALE'],
};

/** Every POST and DELETE acting for a user takes an Idempotency-Key (http/idempotency.ts). */
export const idempotent = (r: Route): boolean => (r.method === 'post' || r.method === 'delete') && r.access !== 'public' && r.access !== 'instance';

/**
 * What an Idempotency-Key can answer: a malformed key (400), the key in flight longer than the wait or with an
 * unknown outcome (409), the key used with another request (422).
 */
const IDEMPOTENCY: ErrorCode[] = ['VALIDATION_FAILED', 'IDEMPOTENCY_KEY_IN_FLIGHT', 'IDEMPOTENCY_KEY_REUSED'];

/** What the JSON body parser refuses (http/body.ts), for operations that take a body. */
const BODY: ErrorCode[] = ['VALIDATION_FAILED', 'INVALID_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE'];

export function errorCodes(route: Route): ErrorCode[] {
  const codes = new Set<ErrorCode>([
    ...BY_ACCESS[route.access],
    ...(route.body ? BODY : []),
    // A path parameter is validated by the backend (and malformed percent-encoding by the router).
    ...(route.query || route.path.includes(':') ? (['VALIDATION_FAILED'] as const) : []),
    ...(route.path.includes(':instanceId') ? (['INSTANCE_NOT_FOUND'] as const) : []),
    ...(route.rateLimit ? (['RATE_LIMITED'] as const) : []),
    ...(idempotent(route) ? IDEMPOTENCY : []),
    ...(route.errors ?? []),
    // Any operation: a backend that does not answer, or a bug.
    'SERVICE_UNAVAILABLE',
    'INTERNAL',
  ]);
  return [...codes];
}

/** The codes grouped by HTTP status, in status order. */
export function byStatus(codes: ErrorCode[]): Map<number, ErrorCode[]> {
  const groups = new Map<number, ErrorCode[]>();
  for (const code of [...codes].sort()) {
    const status = ERROR_CODES[code].status;
    groups.set(status, [...(groups.get(status) ?? []), code]);
  }
  return new Map([...groups].sort(([a], [b]) => a - b));
}
