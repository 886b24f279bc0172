import type { Logger } from '@agenthost/shared';

/**
 * Test-only fault injection (FAULT_PAUSE_AT=leased,volume,...): an operation reaching a named point
 * logs {"event":"fault_pause","point":...} and stops there for ten minutes, so a test can SIGKILL the
 * process at exactly that step, or let it go on with SIGUSR2 (a race it sets up meanwhile). Empty in every real
 * deployment.
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
  const paused = new Set<() => void>();
  process.on('SIGUSR2', () => {
    for (const go of paused) go();
    paused.clear();
  });
  return async (point) => {
    if (!points.has(point)) return;
    log.warn({ event: 'fault_pause', point }, `paused at ${point}`);
    await new Promise<void>((resolve) => {
      const go = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(go, 600_000);
      paused.add(go);
    });
    log.warn({ event: 'fault_resume', point }, `resumed at ${point}`);
  };
}
