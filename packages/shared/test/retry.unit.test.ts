import { describe, expect, it } from 'vitest';
import { backoffMs, retry } from '../src/retry.ts';

const failing = (times: number, err = new Error('not yet')) => {
  let calls = 0;
  const fn = async () => {
    calls++;
    if (calls <= times) throw err;
    return calls;
  };
  return { fn, calls: () => calls };
};

describe('retry', () => {
  it('tries again until the step succeeds', async () => {
    const step = failing(2);
    const retried: number[] = [];
    expect(await retry(step.fn, { delayMs: 1, onRetry: (_e, n) => void retried.push(n) })).toBe(3);
    expect(retried).toEqual([1, 2]);
  });

  it('throws the last error after the given number of attempts', async () => {
    const step = failing(10);
    await expect(retry(step.fn, { delayMs: 0, attempts: 3 })).rejects.toThrow('not yet');
    expect(step.calls()).toBe(3);
  });

  it('throws at once an error that is not retryable', async () => {
    const step = failing(10, new Error('refused'));
    await expect(retry(step.fn, { delayMs: 0, retryable: (e) => (e as Error).message !== 'refused' })).rejects.toThrow('refused');
    expect(step.calls()).toBe(1);
  });

  it('gives up once the clock has passed `until`', async () => {
    let t = 0;
    const step = failing(10);
    await expect(retry(async () => ((t += 100), step.fn()), { delayMs: 0, until: 250, now: () => t })).rejects.toThrow('not yet');
    expect(step.calls()).toBe(3);
  });
});

describe('backoffMs', () => {
  it('doubles from the initial wait and stops at the cap', () => {
    expect([1, 2, 3, 4, 5, 6, 40, 5000].map((n) => backoffMs(n, { initialMs: 1000, maxMs: 30_000 }))).toEqual([
      1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000,
    ]);
  });
});
