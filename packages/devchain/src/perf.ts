/**
 * Performance samples as agave's SamplePerformanceService takes them: every `periodSeconds`
 * of real time, the root (finalized) slot and how many slots and transactions were rooted
 * since the previous sample. devchain has no votes, so every transaction is a non-vote one.
 */
import type { SlotClock } from './clock.ts';
import type { Ledger } from './ledger.ts';

/** agave keeps (and getRecentPerformanceSamples answers) at most 720 samples: 12 hours. */
export const MAX_PERF_SAMPLES = 720;

export interface PerfSample {
  slot: number;
  numTransactions: number;
  numNonVoteTransactions: number;
  numSlots: number;
  samplePeriodSecs: number;
}

export class PerfSamples {
  /** Newest first, the order getRecentPerformanceSamples answers in. */
  private readonly samples: PerfSample[] = [];
  private readonly clock: SlotClock;
  private readonly ledger: Ledger;
  private readonly periodSeconds: number;
  private lastSlot: number;
  private lastAt = Date.now();

  constructor(clock: SlotClock, ledger: Ledger, periodSeconds: number) {
    this.clock = clock;
    this.ledger = ledger;
    this.periodSeconds = periodSeconds;
    this.lastSlot = clock.commitmentSlot('finalized');
    clock.onSlot(() => this.maybeSample());
  }

  private maybeSample(): void {
    const elapsedMs = Date.now() - this.lastAt;
    if (elapsedMs < this.periodSeconds * 1000) return;
    const root = this.clock.commitmentSlot('finalized');
    let transactions = 0;
    for (let s = this.lastSlot + 1; s <= root; s++) transactions += this.ledger.inSlot(s).length;
    this.samples.unshift({
      slot: root,
      numTransactions: transactions,
      numNonVoteTransactions: transactions,
      numSlots: root - this.lastSlot,
      samplePeriodSecs: Math.floor(elapsedMs / 1000),
    });
    this.samples.length = Math.min(this.samples.length, MAX_PERF_SAMPLES);
    this.lastSlot = root;
    this.lastAt += elapsedMs;
  }

  recent(limit: number): PerfSample[] {
    return this.samples.slice(0, limit);
  }
}
