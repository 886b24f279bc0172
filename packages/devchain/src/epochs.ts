/**
 * devchain's epoch schedule: every epoch has the same length from slot 0 (no warmup, so
 * firstNormalEpoch and firstNormalSlot are 0), and the leader schedule of an epoch is known
 * one epoch ahead (leaderScheduleSlotOffset = slotsPerEpoch), as on mainnet.
 */
export class EpochSchedule {
  readonly slotsPerEpoch: number;

  constructor(slotsPerEpoch: number) {
    this.slotsPerEpoch = slotsPerEpoch;
  }

  epochOf(slot: number): number {
    return Math.floor(slot / this.slotsPerEpoch);
  }

  firstSlotOf(epoch: number): number {
    return epoch * this.slotsPerEpoch;
  }

  /** getEpochSchedule's answer. */
  toJson() {
    return {
      firstNormalEpoch: 0,
      firstNormalSlot: 0,
      leaderScheduleSlotOffset: this.slotsPerEpoch,
      slotsPerEpoch: this.slotsPerEpoch,
      warmup: false,
    };
  }
}
