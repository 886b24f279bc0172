import { describe, expect, it } from 'vitest';
import { judgeSwap } from '../src/docker/swap.ts';

const HEADER = 'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority';
const swaps = (...lines: string[]) => [HEADER, ...lines].join('\n') + '\n';
const crypt = (dev: string) => (dev === 'dm-0' ? 'CRYPT-PLAIN-swap' : dev === 'dm-1' ? 'LVM-abc' : undefined);

describe('which swap may hold a sleeping agent’s memory', () => {
  it('takes zram and dm-crypt devices, which keep the agent’s keys off plain disk', () => {
    expect(judgeSwap(swaps('/dev/zram0                              partition\t8388604\t0\t100'), crypt).usable).toBe(true);
    expect(judgeSwap(swaps('/dev/dm-0 partition 1024 0 -2', '/dev/zram1 partition 1024 0 5'), crypt).usable).toBe(true);
  });

  it('refuses when any swap is a plain file or partition (the kernel may put the pages there), and names it', () => {
    const file = judgeSwap(swaps('/dev/zram0 partition 1024 0 100', '/swapfile file 2097148 0 -2'), crypt);
    expect(file.usable).toBe(false);
    expect(file.reason).toContain('/swapfile');
    expect(judgeSwap(swaps('/dev/vda2 partition 1024 0 -2'), crypt).usable).toBe(false);
    // A device-mapper volume that is not dm-crypt (LVM) writes in the clear.
    expect(judgeSwap(swaps('/dev/dm-1 partition 1024 0 -2'), crypt).usable).toBe(false);
  });

  it('says so when the host has no swap at all', () => {
    const none = judgeSwap(swaps(), crypt);
    expect(none.usable).toBe(false);
    expect(none.reason).toMatch(/no swap/);
  });
});
