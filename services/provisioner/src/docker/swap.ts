import { hostSwap, judgeSwap, type Logger, type SwapVerdict } from '@agenthost/shared';
import type { ProvisionerConfig } from '../config.ts';

/**
 * Whether a sleeping agent's memory may be pushed out to this host's swap (docker/freeze.ts): judgeSwap and hostSwap
 * live in packages/shared (instance-host.ts), which the test kit and the benchmarks read too.
 */
export { hostSwap, judgeSwap, type SwapVerdict };

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
