import { readFileSync } from 'node:fs';
import type { Logger } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';

/**
 * Whether a sleeping agent's memory may be pushed out to this host's swap (docker/freeze.ts). The agent's memory
 * holds its provider keys in the clear, so only swap that never writes it to disk as it is counts: zram (compressed,
 * in memory) and dm-crypt devices. One plain swap file or partition among them and the kernel may put the pages
 * there: then sleeping agents are only frozen. Instances' containers never swap otherwise (memory+swap = memory).
 */
export interface SwapVerdict {
  usable: boolean;
  /** What was found, for the log and the doctor. */
  reason: string;
}

export function judgeSwap(procSwaps: string, dmUuid: (device: string) => string | undefined): SwapVerdict {
  const devices = procSwaps
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length >= 2 && f[0])
    .map((f) => ({ name: f[0]!, type: f[1]! }));
  if (devices.length === 0) return { usable: false, reason: 'the host has no swap: sleeping agents are frozen with their memory' };
  const plain = devices.filter((d) => !safeDevice(d, dmUuid));
  if (plain.length > 0)
    return {
      usable: false,
      reason: `swap ${plain.map((d) => d.name).join(', ')} would hold agents' memory on disk in the clear: sleeping agents are frozen with their memory`,
    };
  return { usable: true, reason: `swap ${devices.map((d) => d.name).join(', ')} keeps agents' memory off plain disk` };
}

function safeDevice(d: { name: string; type: string }, dmUuid: (device: string) => string | undefined): boolean {
  if (d.type !== 'partition') return false; // a swap file sits on a filesystem's plain blocks
  const base = d.name.replace(/^\/dev\//, '');
  if (/^zram\d+$/.test(base)) return true;
  return /^dm-\d+$/.test(base) && (dmUuid(base) ?? '').startsWith('CRYPT-');
}

/** This host's verdict (the provisioner runs on the host or sees its /proc and /sys). */
export function hostSwap(): SwapVerdict {
  let swaps: string;
  try {
    swaps = readFileSync('/proc/swaps', 'utf8');
  } catch {
    return { usable: false, reason: '/proc/swaps is not readable: sleeping agents are frozen with their memory' };
  }
  return judgeSwap(swaps, (dev) => {
    try {
      return readFileSync(`/sys/block/${dev}/dm/uuid`, 'utf8').trim();
    } catch {
      return undefined;
    }
  });
}

/**
 * What a light sleep keeps resident (SLEEP_RESIDENT_MB) when the host's swap may hold the rest; undefined: sleeping
 * agents are only frozen (SLEEP_SWAP=off, the swarm driver, or a swap that is not safe for it; the log says which).
 */
export function sleepResidentMb(config: Pick<ProvisionerConfig, 'SLEEP_SWAP' | 'SLEEP_RESIDENT_MB'>, swarm: boolean, log: Logger): number | undefined {
  if (swarm || config.SLEEP_SWAP === 'off') return undefined;
  const verdict = hostSwap();
  log.info({ swap_usable: verdict.usable, resident_mb: config.SLEEP_RESIDENT_MB }, `idle sleep: ${verdict.reason}`);
  return verdict.usable ? config.SLEEP_RESIDENT_MB : undefined;
}
