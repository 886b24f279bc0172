/**
 * Slots, blockhashes, commitment levels and the chain clock.
 *
 * A slot ticks every `slotMs`; every slot is a block (block height = slot) whose blockhash
 * is sha256(per-chain random seed, slot), so getBlock can name any slot's hash without
 * keeping it. A transaction lands in the current slot (processed), is confirmed once one
 * more slot has passed and finalized `finalizeSlots` slots after that.
 * The chain clock is real time plus an offset that only ever grows (devchain_advanceClock).
 * A block's time is the chain time when its slot ended (the open slot's is "now").
 */
import { createHash, randomBytes } from 'node:crypto';
import { b58encode } from './encoding.ts';

export type Commitment = 'processed' | 'confirmed' | 'finalized';

/** A blockhash is usable for this many slots (agave's MAX_PROCESSING_AGE). */
const MAX_PROCESSING_AGE = 150;
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
  /** Blockhashes derive from this, so any slot's hash can be given back without keeping it. */
  private readonly hashSeed = randomBytes(32);
  /**
   * Block times as runs: slot runStarts[i] and the slots after it (up to the next run) share
   * runTimes[i]. Times change once a second, so this grows by ~1 entry a second, not per slot.
   */
  private readonly runStarts: number[] = [];
  private readonly runTimes: number[] = [];

  constructor(slotMs: number, finalizeSlots: number) {
    this.slotMs = slotMs;
    this.finalizeSlots = finalizeSlots;
    // Start with slot 0 (genesis) already finalized.
    this.current = finalizeSlots + 1;
    for (let s = 0; s <= this.current; s++) this.addHash(s);
    this.stampBlockTime(0);
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
    this.stampBlockTime(this.current);
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

  private stampBlockTime(slot: number): void {
    const time = this.now();
    if (this.runTimes[this.runTimes.length - 1] !== time) {
      this.runStarts.push(slot);
      this.runTimes.push(time);
    }
  }

  /** Unix seconds of a block: for the open slot the current chain time; null for future slots. */
  blockTime(slot: number): number | null {
    if (slot > this.current || slot < 0) return null;
    if (slot === this.current) return this.now();
    let lo = 0;
    let hi = this.runStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((this.runStarts[mid] as number) <= slot) lo = mid;
      else hi = mid - 1;
    }
    return this.runTimes[lo] as number;
  }

  /** The blockhash of any slot up to the current one. */
  blockhashOf(slot: number): string {
    const slotBytes = Buffer.alloc(8);
    slotBytes.writeBigUInt64LE(BigInt(slot));
    return b58encode(createHash('sha256').update(this.hashSeed).update(slotBytes).digest());
  }

  private addHash(slot: number): void {
    const hash = this.blockhashOf(slot);
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

  /** Chain time in unix milliseconds (slotsUpdates timestamps). */
  nowMs(): number {
    return Math.floor(Date.now() + this.offsetSeconds * 1000);
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
