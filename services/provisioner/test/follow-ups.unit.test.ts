import { afterEach, describe, expect, it, vi } from 'vitest';
import { FollowUps } from '../src/domain/follow-ups.ts';

describe('reconcile passes that follow a swarm node change', () => {
  afterEach(() => vi.useRealTimers());

  it('picks a returning node’s instances up within seconds, one pass pending at a time', () => {
    vi.useFakeTimers();
    let passes = 0;
    const f = new FollowUps(() => passes++, { everyMs: 3000, limit: 5 });
    f.arm();
    f.soon();
    f.soon(); // a second instance still starting in the same pass: still one follow-up
    vi.advanceTimersByTime(2999);
    expect(passes).toBe(0);
    vi.advanceTimersByTime(1);
    expect(passes).toBe(1);
  });

  it('stops after its limit when a task never leaves starting, and starts again at the next node change', () => {
    vi.useFakeTimers();
    let passes = 0;
    const f = new FollowUps(
      () => {
        passes++;
        f.soon(); // every pass meets the same stuck task
      },
      { everyMs: 3000, limit: 5 },
    );
    f.soon(); // no node change yet: nothing follows
    vi.advanceTimersByTime(60_000);
    expect(passes).toBe(0);
    f.arm();
    f.soon();
    vi.advanceTimersByTime(600_000);
    expect(passes).toBe(5);
    f.arm();
    f.soon();
    vi.advanceTimersByTime(3000);
    expect(passes).toBe(6);
    f.stop();
    vi.advanceTimersByTime(600_000);
    expect(passes).toBe(6);
  });
});
