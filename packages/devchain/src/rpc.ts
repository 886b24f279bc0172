/** JSON-RPC 2.0 envelope: parsing, batches, dispatch and error mapping. Never throws. */
import { RpcCode, RpcError } from './errors.ts';
import { parseJson, stringifyJson } from './json.ts';

export type Params = unknown[] | Record<string, unknown>;
type Handler = (params: Params) => unknown;
export type Methods = Record<string, Handler>;

/** bigint: an integer id beyond 2^53, echoed back exactly. */
type Id = string | number | bigint | null;
type Response = { jsonrpc: '2.0'; id: Id; result: unknown } | { jsonrpc: '2.0'; id: Id; error: { code: number; message: string; data?: unknown } };

function errorResponse(id: Id, e: unknown): Response {
  if (e instanceof RpcError) {
    const error: { code: number; message: string; data?: unknown } = { code: e.code, message: e.message };
    if (e.data !== undefined) error.data = e.data;
    return { jsonrpc: '2.0', id, error };
  }
  return { jsonrpc: '2.0', id, error: { code: RpcCode.InternalError, message: `Internal error: ${(e as Error)?.message ?? String(e)}` } };
}

function validId(v: unknown): v is Id {
  return v === null || typeof v === 'string' || typeof v === 'bigint' || (typeof v === 'number' && Number.isFinite(v));
}

/** One request object → response, or null for a notification (no id). */
function handleRequest(req: unknown, methods: Methods): Response | null {
  if (typeof req !== 'object' || req === null || Array.isArray(req)) {
    return { jsonrpc: '2.0', id: null, error: { code: RpcCode.InvalidRequest, message: 'Invalid request' } };
  }
  const r = req as Record<string, unknown>;
  const hasId = 'id' in r;
  const id: Id = validId(r.id) ? r.id : null;
  if (r.jsonrpc !== '2.0' || typeof r.method !== 'string' || (hasId && !validId(r.id))) {
    return { jsonrpc: '2.0', id, error: { code: RpcCode.InvalidRequest, message: 'Invalid request' } };
  }
  const params = r.params === undefined ? [] : r.params;
  if (typeof params !== 'object' || params === null) {
    return hasId ? { jsonrpc: '2.0', id, error: { code: RpcCode.InvalidParams, message: 'Invalid params: params must be an array or object' } } : null;
  }
  const handler = Object.hasOwn(methods, r.method) ? methods[r.method] : undefined;
  if (!handler) return hasId ? { jsonrpc: '2.0', id, error: { code: RpcCode.MethodNotFound, message: 'Method not found' } } : null;
  let response: Response;
  try {
    response = { jsonrpc: '2.0', id, result: handler(params as Params) ?? null };
  } catch (e) {
    response = errorResponse(id, e);
  }
  return hasId ? response : null;
}

/** A raw request body (single or batch) → JSON text to send back, or null when there is nothing to send. */
export function handleBody(body: string, methods: Methods): string | null {
  let parsed: unknown;
  try {
    parsed = parseJson(body);
  } catch {
    return JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: RpcCode.ParseError, message: 'Parse error' } });
  }
  if (Array.isArray(parsed)) {
    if (parsed.length === 0) return JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: RpcCode.InvalidRequest, message: 'Invalid request' } });
    const out = parsed.map((p) => handleRequest(p, methods)).filter((x) => x !== null);
    return out.length ? stringifyJson(out) : null;
  }
  const res = handleRequest(parsed, methods);
  return res === null ? null : stringifyJson(res);
}
