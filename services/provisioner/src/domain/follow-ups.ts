/**
 * Passes that follow a node change while a returning node's instances are still starting. The pass the node watch
 * triggers runs before the swarm has started their tasks, and the next scheduled pass can be a whole
 * RECONCILE_INTERVAL_SECONDS away: in the swarm suite they ran again 57-59 s after their node, against its 60 s.
 * Bounded: a task that never leaves `starting` costs `limit` extra passes after a node change, no more.
 */
export class FollowUps {
  private timer: NodeJS.Timeout | undefined;
  private left = 0;
  private readonly run: () => void;
  private readonly everyMs: number;
  private readonly limit: number;

  constructor(run: () => void, opts: { everyMs?: number; limit?: number } = {}) {
    this.run = run;
    this.everyMs = opts.everyMs ?? 3000;
    this.limit = opts.limit ?? 40;
  }

  /** A node changed: follow-ups may come again. */
  arm(): void {
    this.left = this.limit;
  }

  /** One more pass in a few seconds (one pending at most), while any are left since the last node change. */
  soon(): void {
    if (this.timer || this.left <= 0) return;
    this.left--;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.run();
    }, this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.left = 0;
  }
}
