/**
 * Slots, blockhashes, commitment levels and the chain clock.
 *
 * A slot ticks every `slotMs`; every slot is a block (block height = slot) with a fresh
 * random blockhash. A transaction lands in the current slot (processed), is confirmed once
 * one more slot has passed and finalized `finalizeSlots` slots after that.
 * The chain clock is real time plus an offset that only ever grows (devchain_advanceClock).
 */
import { randomBytes } from 'node:crypto';
import { b58encode } from './encoding.ts';

export type Commitment = 'processed' | 'confirmed' | 'finalized';

/** A blockhash is usable for this many slots (agave's MAX_PROCESSING_AGE). */
export const MAX_PROCESSING_AGE = 150;
const BLOCKHASH_QUEUE = 300;

export class SlotClock {
  readonly slotMs: number;
  readonly finalizeSlots: number;
  private current: number;
  private offsetSeconds = 0;
  private readonly hashBySlot = new Map<number, string>();
  private readonly slotByHash = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners: Array<(slot: number) => void> = [];

  constructor(slotMs: number, finalizeSlots: number) {
    this.slotMs = slotMs;
    this.finalizeSlots = finalizeSlots;
    // Start with slot 0 (genesis) already finalized.
    this.current = finalizeSlots + 1;
    for (let s = 0; s <= this.current; s++) this.addHash(s);
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(), this.slotMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  onSlot(fn: (slot: number) => void): void {
    this.listeners.push(fn);
  }

  /** Advances one slot (the timer calls this; tests may too). */
  tick(): void {
    this.current++;
    this.addHash(this.current);
    const old = this.current - BLOCKHASH_QUEUE;
    const oldHash = this.hashBySlot.get(old);
    if (oldHash !== undefined) {
      this.hashBySlot.delete(old);
      this.slotByHash.delete(oldHash);
    }
    for (const fn of this.listeners) fn(this.current);
  }

  private addHash(slot: number): void {
    const hash = b58encode(randomBytes(32));
    this.hashBySlot.set(slot, hash);
    this.slotByHash.set(hash, slot);
  }

  get slot(): number {
    return this.current;
  }

  /** Highest slot visible at a commitment level. */
  commitmentSlot(c: Commitment): number {
    if (c === 'processed') return this.current;
    if (c === 'confirmed') return this.current - 1;
    return this.current - 1 - this.finalizeSlots;
  }

  statusOf(txSlot: number): Commitment {
    if (txSlot <= this.commitmentSlot('finalized')) return 'finalized';
    if (txSlot <= this.commitmentSlot('confirmed')) return 'confirmed';
    return 'processed';
  }

  latestBlockhash(c: Commitment): { slot: number; blockhash: string; lastValidBlockHeight: number } {
    const slot = this.commitmentSlot(c);
    return { slot, blockhash: this.hashBySlot.get(slot) as string, lastValidBlockHeight: slot + MAX_PROCESSING_AGE };
  }

  /** Valid for a transaction processed now: known, and at most MAX_PROCESSING_AGE slots old. */
  isBlockhashValid(hash: string, asOfSlot = this.current): boolean {
    const slot = this.slotByHash.get(hash);
    return slot !== undefined && slot <= asOfSlot && slot + MAX_PROCESSING_AGE >= this.current;
  }

  /** Chain time in unix seconds. */
  now(): number {
    return Math.floor(Date.now() / 1000 + this.offsetSeconds);
  }

  get offset(): number {
    return this.offsetSeconds;
  }

  /** Moves the chain clock forward; returns the new unix time. */
  advance(seconds: number): number {
    if (!Number.isFinite(seconds) || seconds < 0) throw new RangeError('seconds must be a finite number >= 0');
    this.offsetSeconds += seconds;
    return this.now();
  }
}
