import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';

/*
 * What the provisioner leaves on its host that others must find again: an instance's container name, the tag of an
 * instance network's firewall rules (and their removal by it), and whether the host's swap may hold agents' memory.
 * The provisioner (services/provisioner/src/docker) re-exports these; the test kit and the benchmarks read them here,
 * so neither imports a service.
 */

/** An instance's container (the provisioner's Docker driver names it so; `docker logs`/`exec` find it by this). */
export const containerName = (instanceId: string): string => `agenthost-${instanceId}`;

/** The comment every firewall rule of an instance network carries (services/provisioner/src/docker/firewall.ts). */
export const firewallTag = (network: string): string => `agenthost:${network}`.slice(0, 250);

const exec = promisify(execFile);
const iptables = (args: string[]) => exec('iptables', ['-w', '5', ...args], { timeout: 15_000 });

/** Delete every rule carrying the tag (used when a network is removed, and by tests). */
export async function removeFirewall(tag: string): Promise<number> {
  let removed = 0;
  for (const chain of ['INPUT', 'DOCKER-USER']) {
    let listing: string;
    try {
      listing = (await iptables(['-S', chain])).stdout;
    } catch {
      continue;
    }
    for (const line of listing.split('\n')) {
      if (!line.startsWith('-A ') || (!line.includes(`--comment ${tag} `) && !line.includes(`--comment "${tag}" `))) continue;
      const args = line.replace(/"/g, '').split(/\s+/).filter(Boolean);
      args[0] = '-D';
      await iptables(args).then(
        () => removed++,
        () => {},
      );
    }
  }
  return removed;
}

/**
 * Whether a sleeping agent's memory may be pushed out to this host's swap (the provisioner's docker/freeze.ts). The agent's memory
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
