import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Poll until fn returns something other than undefined/false (a throw counts as "not yet"), or fail after
 * timeoutMs naming what was awaited and the last error. For states reached asynchronously (readiness,
 * events, reconnects) — never a fixed sleep.
 */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await sleep(everyMs);
  }
}
