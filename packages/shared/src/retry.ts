import { setTimeout as sleep } from 'node:timers/promises';

/** The wait before the attempt-th retry (1, 2, ...): doubling from `initialMs`, never more than `maxMs`. */
export function backoffMs(attempt: number, o: { initialMs: number; maxMs: number }): number {
  // The exponent is capped so that a long streak does not overflow to Infinity before the cap applies.
  return Math.min(o.maxMs, o.initialMs * 2 ** Math.min(30, Math.max(0, attempt - 1)));
}

export interface RetryOptions {
  /** Wait before the next attempt: a fixed time, or by the number of the attempt that failed (1, 2, ...). */
  delayMs: number | ((failed: number) => number);
  /** Give up after this many attempts (the last error is thrown). Unbounded when omitted. */
  attempts?: number;
  /** Give up when an attempt fails at or after this time (ms, on `now`). */
  until?: number;
  /** Which errors are worth another attempt; any other is thrown at once. Every error when omitted. */
  retryable?: (err: unknown) => boolean;
  /** Told of each failure that will be tried again (to log it). */
  onRetry?: (err: unknown, failed: number) => void;
  /** The clock `until` is read on (an injected clock in tests). */
  now?: () => number;
  /** false: the waits do not keep the process alive (a retry in the background of a server). */
  ref?: boolean;
}

/**
 * Run `fn` until it resolves: a failure that is retryable, within the attempts and before `until`, waits
 * `delayMs` and runs it again; otherwise its error is thrown. The one way a failed step is tried again.
 */
export async function retry<T>(fn: (attempt: number) => Promise<T>, o: RetryOptions): Promise<T> {
  const now = o.now ?? Date.now;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      const last = (o.attempts !== undefined && attempt >= o.attempts) || (o.until !== undefined && now() >= o.until);
      if (last || (o.retryable && !o.retryable(err))) throw err;
      o.onRetry?.(err, attempt);
      const ms = typeof o.delayMs === 'number' ? o.delayMs : o.delayMs(attempt);
      if (ms > 0) await sleep(ms, undefined, { ref: o.ref ?? true });
    }
  }
}
