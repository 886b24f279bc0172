/**
 * What every Engine API call needs and no engine client: the options cast, the status Docker answered with, "already
 * gone" as success, and an error described for logs. Kept apart from engine.ts so that code which only reads an
 * error or builds options does not depend on the client.
 */

/**
 * Options for a dockerode call, typed loosely: @types/dockerode lacks abortSignal on several methods,
 * and a loose object keeps overload resolution on the Promise-returning signature.
 */
export const o = (x: Record<string, unknown>): object => x;

/** Docker answered with this HTTP status. */
export const dockerStatus = (err: unknown): number | undefined => (err as { statusCode?: number } | undefined)?.statusCode;

/** A short description of a Docker error for logs (never the request body, which may hold secrets). */
export function describe(err: unknown): string {
  const e = err as { statusCode?: number; message?: string; code?: string; json?: { message?: string } } | undefined;
  if (!e) return 'unknown error';
  if (e.statusCode) return `HTTP ${e.statusCode}: ${e.json?.message ?? e.message ?? ''}`.slice(0, 300);
  return `${e.code ?? ''} ${e.message ?? ''}`.trim().slice(0, 300);
}

/** Ignore "not found" (already gone) and "not modified" (already in that state). */
export async function ignoreGone<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    const s = dockerStatus(err);
    if (s === 404 || s === 304) return undefined;
    throw err;
  }
}
