import { LRUCache } from 'lru-cache';

/**
 * The last answer of each read a route marks `lastKnown` (subscription status, instance list, instance status), per
 * user and path, served back to the same user when the backend that owns it is unavailable (its database is away):
 * with `Age`, for up to OUTAGE_SERVE_SECONDS. A write of the user's drops what is kept of theirs, so a cut-off read
 * never shows the state from before it. Memory: bounded by entries; each answer is a small JSON body.
 */
export class LastAnswers {
  private readonly cache: LRUCache<string, { body: unknown; at: number }>;
  private readonly byUser = new Map<string, Set<string>>();
  private readonly now: () => number;

  constructor(opts: { maxAgeMs: number; max?: number; now?: () => number }) {
    this.now = opts.now ?? Date.now;
    this.cache = new LRUCache({
      max: opts.max ?? 20_000,
      ttl: Math.max(1, opts.maxAgeMs),
      dispose: (_v, key) => this.byUser.get(userOf(key))?.delete(key),
    });
  }

  keep(userId: string, path: string, body: unknown): void {
    const key = `${userId} ${path}`;
    this.cache.set(key, { body, at: this.now() });
    let keys = this.byUser.get(userId);
    if (!keys) this.byUser.set(userId, (keys = new Set()));
    keys.add(key);
  }

  /** The last answer to this user's read of this path, and its age in seconds, if one is kept. */
  last(userId: string, path: string): { body: unknown; ageSeconds: number } | undefined {
    const hit = this.cache.get(`${userId} ${path}`);
    return hit && { body: hit.body, ageSeconds: Math.max(0, Math.floor((this.now() - hit.at) / 1000)) };
  }

  /** The user changed something: nothing kept of theirs is served again. */
  forget(userId: string): void {
    const keys = this.byUser.get(userId);
    if (!keys) return;
    this.byUser.delete(userId);
    for (const k of keys) this.cache.delete(k);
  }
}

const userOf = (key: string) => key.slice(0, key.indexOf(' '));
