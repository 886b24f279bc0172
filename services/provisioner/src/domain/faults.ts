import type { Logger } from '@agenthost/shared';

/**
 * Test-only fault injection (FAULT_PAUSE_AT=leased,volume,...): an operation reaching a named point
 * logs {"event":"fault_pause","point":...} and stops there for ten minutes, so a test can SIGKILL the
 * process at exactly that step. Empty in every real deployment.
 */
export function faults(spec: string, log: Logger): (point: string) => Promise<void> {
  const points = new Set(
    spec
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  if (points.size === 0) return async () => {};
  log.warn({ points: [...points] }, 'fault injection is enabled');
  return async (point) => {
    if (!points.has(point)) return;
    log.warn({ event: 'fault_pause', point }, `paused at ${point}`);
    await new Promise((r) => setTimeout(r, 600_000));
  };
}
