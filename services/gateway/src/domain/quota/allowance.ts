import { AppError } from '@agenthost/shared';

/**
 * The small allowance of callers the tier quota does not count: signed-in users without a subscription (their
 * /subscription/status, /refresh and /register) and registrations (an upgrade must pass at the tier's limit).
 * Each costs billing-chain work, and a refresh up to three chain reads, so each user gets `perMinute` of them
 * per minute per gateway replica (a fixed window in memory: an abuse limit, not a bill), then 429 RATE_LIMITED.
 */
export class Allowance {
  private readonly perMinute: number;
  private readonly now: () => number;
  private window = 0;
  private readonly used = new Map<string, number>();

  constructor(perMinute: number, now: () => number = Date.now) {
    this.perMinute = perMinute;
    this.now = now;
  }

  take(userId: string): void {
    const now = this.now();
    const window = Math.floor(now / 60_000);
    if (window !== this.window) {
      this.window = window;
      this.used.clear();
    }
    const n = (this.used.get(userId) ?? 0) + 1;
    if (n > this.perMinute) {
      const retryAfter = Math.max(1, Math.ceil(((window + 1) * 60_000 - now) / 1000));
      throw new AppError('RATE_LIMITED', `At most ${this.perMinute} requests per minute without a subscription (and registrations); retry in ${retryAfter} s`, {
        retryAfter,
      });
    }
    this.used.set(userId, n);
  }
}
