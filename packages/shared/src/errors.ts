// One error type for the whole system. A service throws AppError; the NATS wrapper turns it into an
// error reply; the gateway turns that back into AppError and sends { error, code, status }.
// Anything that is not an AppError becomes a generic INTERNAL error: internal messages never reach a client.

export const ERROR_CODES = {
  // 400
  VALIDATION_FAILED: { status: 400, message: 'Request validation failed' },
  INVALID_JSON: { status: 400, message: 'Request body is not valid JSON' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'Content-Type must be application/json' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'Request body is too large' },
  MALFORMED_REQUEST: { status: 400, message: 'The HTTP request is malformed' },
  REQUEST_TIMEOUT: { status: 408, message: 'The request was not received in time' },
  /** GET /instance/wait: the state was not reached within the timeout (ask again). */
  WAIT_TIMEOUT: { status: 408, message: 'The instance did not reach the state within the timeout' },
  REQUEST_HEADER_TOO_LARGE: { status: 431, message: 'The request line or headers are too large' },
  // 401
  UNAUTHORIZED: { status: 401, message: 'Missing or invalid access token' },
  INVALID_SIGNATURE: { status: 401, message: 'Signature is invalid' },
  NONCE_INVALID: { status: 401, message: 'Nonce is unknown, used or expired' },
  INSTANCE_UNAUTHORIZED: { status: 401, message: 'Instance credentials are invalid' },
  /** Between services: a request acting for a user without a valid assertion signed by the gateway (missing, forged, expired, replayed). */
  ASSERTION_INVALID: { status: 401, message: 'The caller assertion is missing or invalid' },
  // 402
  SUBSCRIPTION_REQUIRED: { status: 402, message: 'An active subscription is required' },
  // 403
  /** Between services: a valid assertion, but for another subject, body or user. */
  ASSERTION_MISMATCH: { status: 403, message: 'The caller assertion does not match the request' },
  DAILY_LIMIT_EXCEEDED: { status: 403, message: 'Daily request limit reached' },
  INSTANCE_LIMIT_EXCEEDED: { status: 403, message: 'Instance limit of the tier reached' },
  SUBSCRIPTION_CANCELLED: { status: 403, message: 'Subscription is cancelled; no new instances can be created' },
  STORAGE_LIMIT_EXCEEDED: { status: 403, message: 'Storage limit of the tier reached' },
  // 404
  NOT_FOUND: { status: 404, message: 'Not found' },
  INSTANCE_NOT_FOUND: { status: 404, message: 'Instance not found' },
  SUBSCRIPTION_NOT_FOUND: { status: 404, message: 'No subscription found' },
  TRANSACTION_NOT_FOUND: { status: 404, message: 'Transaction not found or not yet confirmed' },
  KEY_NOT_FOUND: { status: 404, message: 'Key not found' },
  BACKUP_NOT_FOUND: { status: 404, message: 'Backup not found' },
  DEVICE_REQUEST_NOT_FOUND: { status: 404, message: 'No pending pairing request with this id (list the devices for the current one)' },
  // 409
  CONFLICT: { status: 409, message: 'Request conflicts with the current state' },
  INSTANCE_STATE_CONFLICT: { status: 409, message: 'Instance is not in a state that allows this action' },
  /** GET /instance/wait: the instance turned failed while waiting for running or stopped (the reason is in the message). */
  WAIT_INSTANCE_FAILED: { status: 409, message: 'The instance failed while it was waited for' },
  /** A request with the Idempotency-Key of one still being answered (or whose gateway died mid-request, until it expires). */
  IDEMPOTENCY_KEY_IN_FLIGHT: { status: 409, message: 'A request with this Idempotency-Key is still in progress' },
  PORTS_EXHAUSTED: { status: 409, message: 'No port is free in the configured instance port range' },
  /** A backup whose archive fails its authentication (altered, damaged, or not this user's and instance's): nothing was restored. */
  /** GET /instance/events: the stream no longer holds the events after this Last-Event-ID (older than it keeps): open without it. */
  LAST_EVENT_ID_EXPIRED: { status: 410, message: 'The events after this Last-Event-ID are no longer kept; reconnect without it for the current state' },
  /** The Idempotency-Key was used before with another method, path or body. */
  IDEMPOTENCY_KEY_REUSED: { status: 422, message: 'This Idempotency-Key was used with a different request' },
  BACKUP_CORRUPT: { status: 422, message: 'The backup archive failed its integrity check; nothing was restored' },
  // 429
  RATE_LIMITED: { status: 429, message: 'Too many requests' },
  // 5xx
  INTERNAL: { status: 500, message: 'Internal server error' },
  BACKUPS_UNSUPPORTED: { status: 501, message: 'Backups are not available on this deployment (no BACKUP_KEY)' },
  UPGRADES_UNSUPPORTED: { status: 501, message: 'Upgrades are not available on this deployment (the swarm driver)' },
  DEVICES_UNSUPPORTED: { status: 501, message: 'Device pairing is not available for this instance (its framework, or the swarm driver)' },
  SERVICE_UNAVAILABLE: { status: 503, message: 'A backend service is unavailable' },
  CHAIN_UNAVAILABLE: { status: 503, message: 'The blockchain RPC is unavailable' },
  DOCKER_UNAVAILABLE: { status: 503, message: 'The container engine is unavailable' },
  // Answered by the edge itself for an instance's own address (https://<instance_id>.<domain>/)
  INSTANCE_STARTING: { status: 503, message: 'The instance is starting; retry shortly' },
  INSTANCE_STOPPED: { status: 503, message: 'The instance is stopped; start it to reach it' },
  INSTANCE_FAILED: { status: 503, message: 'The instance failed; restart it to reach it' },
  INSTANCE_UNREACHABLE: { status: 502, message: 'The instance did not answer' },
  // keyvault
  KEY_LIMIT_EXCEEDED: { status: 400, message: 'An instance holds too many keys' },
  INSTANCE_CREDENTIALS_STALE: { status: 409, message: 'Instance credentials were issued under a retired master key; restart the instance' },
  // billing-chain: refused registrations (all 400, one code per kind of refusal; the design's single INVALID_TRANSACTION is split so clients can tell them apart)
  TX_SIGNATURE_MALFORMED: { status: 400, message: 'tx_signature is not a base58-encoded 64-byte transaction signature' },
  INVALID_TIER: { status: 400, message: 'tier must be 0 (free), 1 (pro) or 2 (enterprise)' },
  TX_FAILED: { status: 400, message: 'The transaction failed on chain' },
  TX_WRONG_PROGRAM: { status: 400, message: 'The transaction did not invoke the subscription program' },
  TX_NOT_SUBSCRIBE: { status: 400, message: 'The transaction has no subscribe instruction of the subscription program' },
  TX_WRONG_SIGNER: { status: 400, message: "The transaction's subscribe was not signed by the caller's wallet" },
  TX_TIER_MISMATCH: { status: 400, message: 'The transaction subscribed to another tier than the one given' },
  TX_ALREADY_USED: { status: 400, message: 'The transaction was already used to register another wallet' },
  SUBSCRIPTION_ACCOUNT_INVALID: { status: 400, message: 'The on-chain subscription account failed verification' },
  // webhooks (gateway)
  /** Not https, or a host that is (or resolves to) a private, loopback, link-local, CGNAT or unique-local address. */
  WEBHOOK_URL_REFUSED: { status: 400, message: 'The webhook URL must be https and reach a public address' },
  WEBHOOK_LIMIT_EXCEEDED: { status: 403, message: 'Webhook endpoint limit reached' },
  WEBHOOK_NOT_FOUND: { status: 404, message: 'Webhook endpoint not found' },
  WEBHOOK_DELIVERY_NOT_FOUND: { status: 404, message: 'Webhook delivery not found' },
  /** WEBHOOKS=off, or no GATEWAY_DATA_KEY and no GATEWAY_ASSERTION_PRIVATE_KEY to derive one from (signing secrets cannot be kept sealed). */
  WEBHOOKS_UNAVAILABLE: { status: 501, message: 'Webhooks are not configured on this deployment' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorBody {
  error: string;
  code: ErrorCode;
  status: number;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  readonly details: Record<string, unknown> | undefined;
  /** Seconds a client should wait before retrying (sets Retry-After). */
  readonly retryAfter: number | undefined;

  constructor(code: ErrorCode, message?: string, opts: { details?: Record<string, unknown>; retryable?: boolean; retryAfter?: number; cause?: unknown } = {}) {
    super(message ?? ERROR_CODES[code].message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
    this.retryable = opts.retryable ?? this.status >= 500;
    this.details = opts.details;
    this.retryAfter = opts.retryAfter;
  }

  /**
   * A failure of the service's own (a 5xx), as against a refusal of the request (a 4xx, or a 501: this deployment
   * does not offer it, say devices on the swarm driver or backups without a key). Failures are logged as such.
   */
  get failure(): boolean {
    return this.status >= 500 && this.status !== 501;
  }

  toBody(): ErrorBody {
    return { error: this.message, code: this.code, status: this.status };
  }

  /** The shape carried in a NATS error reply. */
  toWire(): WireError {
    return {
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      ...(this.details ? { details: this.details } : {}),
      ...(this.retryAfter !== undefined ? { retryAfter: this.retryAfter } : {}),
    };
  }

  static fromWire(w: WireError): AppError {
    const code = isErrorCode(w.code) ? w.code : 'INTERNAL';
    return new AppError(code, code === 'INTERNAL' ? undefined : w.message, {
      details: w.details,
      retryable: w.retryable,
      retryAfter: w.retryAfter,
    });
  }
}

export interface WireError {
  code: string;
  message: string;
  retryable?: boolean;
  details?: Record<string, unknown>;
  retryAfter?: number;
}

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}

/**
 * Any thrown value → an AppError safe to show a client. A database that cannot be reached is a 503 the
 * client may retry (not a 500); any other unknown error becomes INTERNAL.
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (isConnectionError(err))
    return new AppError('SERVICE_UNAVAILABLE', 'The database is unavailable; retry shortly', { retryable: true, retryAfter: 1, cause: err });
  return new AppError('INTERNAL', undefined, { cause: err });
}

/**
 * Socket and Postgres codes of a database that cannot be reached. A name that does not resolve is one too: on a
 * swarm the database's service name has no address while its task is down (ENOTFOUND), or DNS answers nothing yet
 * (EAI_AGAIN); the swarm suite's node crash gave 174 500s through the gateway before these were here.
 */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  '57P01',
  '57P02',
  '57P03',
  '08006',
  '08001',
  '08003',
  '08004',
]);

/** True when the error means Postgres could not be reached (as opposed to a bad query). */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined;
  if (!e || typeof e !== 'object') return false;
  if (e.code && UNREACHABLE.has(e.code)) return true;
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(e.message ?? '');
}

export const validationError = (field: string, problem: string): AppError => new AppError('VALIDATION_FAILED', `${field}: ${problem}`, { details: { field } });
