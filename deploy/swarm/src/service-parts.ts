// The parts every platform service's spec is made of (stack.ts puts them together): update and rollback policy,
// health check timing, reservations and limits, and the hardening the Engine API allows on a swarm service.

export const MB = 1024 * 1024;

export type Mount = {
  Type: 'volume' | 'bind' | 'tmpfs';
  Target: string;
  Source?: string;
  ReadOnly?: boolean;
  TmpfsOptions?: { SizeBytes: number; Mode?: number };
};

export const envList = (env: Record<string, string>) => Object.entries(env).map(([k, v]) => `${k}=${v}`);

export const rolling = (order: 'start-first' | 'stop-first') => ({
  UpdateConfig: { Parallelism: 1, Delay: 1_000_000_000, FailureAction: 'rollback', Monitor: 10_000_000_000, MaxFailureRatio: 0, Order: order },
  RollbackConfig: { Parallelism: 1, Delay: 0, FailureAction: 'pause', Monitor: 5_000_000_000, MaxFailureRatio: 0, Order: order },
});

/** A task's health check; `patience`: how long one check may take and how many may fail in a row before it is unhealthy. */
export const health = (test: string[], startSeconds = 60, patience = { timeoutSeconds: 4, retries: 3 }) => ({
  Test: test,
  Interval: 5_000_000_000,
  Timeout: patience.timeoutSeconds * 1_000_000_000,
  Retries: patience.retries,
  StartPeriod: startSeconds * 1_000_000_000,
});

export const resources = (reserveMb: number, reserveCpu: number, limitMb: number, limitCpu: number) => ({
  Reservations: { MemoryBytes: reserveMb * MB, NanoCPUs: Math.round(reserveCpu * 1e9) },
  Limits: { MemoryBytes: limitMb * MB, NanoCPUs: Math.round(limitCpu * 1e9) },
});

export const hardened = {
  CapabilityDrop: ['ALL'],
  Mounts: [{ Type: 'tmpfs', Target: '/tmp', TmpfsOptions: { SizeBytes: 64 * MB, Mode: 0o1777 } }] as Mount[],
  StopGracePeriod: 15_000_000_000,
};
