/** An API refusal, with the body every error has ({ error, code, status }). */
export class AgenthostError extends Error {
  readonly code: string;
  readonly status: number;
  readonly details: unknown;

  constructor(status: number, body: unknown) {
    const b = (body && typeof body === 'object' ? body : {}) as { error?: string; code?: string; details?: unknown };
    super(b.error ?? `HTTP ${status}`);
    this.name = 'AgenthostError';
    this.status = status;
    this.code = b.code ?? `HTTP_${status}`;
    this.details = b.details;
  }
}

/** The data of an openapi-fetch answer, or its error thrown as an AgenthostError. */
export function unwrap<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.error !== undefined || !r.response.ok) throw new AgenthostError(r.response.status, r.error);
  return r.data as T;
}
