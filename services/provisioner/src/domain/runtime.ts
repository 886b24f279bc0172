import type { InstanceRow } from '../db/schema.ts';

export interface Credentials {
  instance_secret: string;
  instance_key: string;
  key_id: string;
}

/** The failure reason of an instance whose node is unreachable; it comes back by itself with the node. */
export const NODE_DOWN = 'node_down';

/** What the runtime knows of an instance's workload right now. */
export interface RuntimeState {
  /** starting: being started or restarted by the runtime (not a failure yet). node_down: its node is unreachable. */
  state: 'running' | 'starting' | 'exited' | 'created' | 'missing' | 'node_down';
  /** exited: its exit code. starting: the code of its last exit, when the runtime is restarting it after a crash. */
  exitCode?: number;
  /** running: its processes are frozen (a light sleep, docker/freeze.ts). */
  paused?: boolean;
  /** When the running workload started (ms since the epoch). */
  startedAt?: number;
  /** Why the runtime gave up on it (swarm task error), when it says. */
  error?: string;
  /** exited: the kernel's OOM killer ended it (the memory limit). */
  oomKilled?: boolean;
  /** exited: when (ms since the epoch). */
  finishedAt?: number;
}

/**
 * The checkpointed sleep (docker driver, where CRIU works here: docker/checkpoint.ts): an agent's processes dumped to
 * an encrypted image bound to its instance, workload and checkpoint id, and restored into the same running workload.
 */
export interface InstanceCheckpoints {
  /** Whether the workload was made checkpointable (hold-init as its PID 1). */
  can(id: string): Promise<boolean>;
  /** Dump the running agent and seal its image; resolves to what it took, for the log (image_mb, dump_ms, seal_ms). */
  checkpoint(id: string, checkpointId: string): Promise<Record<string, number>>;
  /** Restore the agent from that checkpoint's image (deleted once restored); `cpus`: its tier's share. Resolves as checkpoint. */
  restore(id: string, checkpointId: string, cpus: number): Promise<Record<string, number>>;
  /** Delete the instance's image, if any. */
  drop(id: string): Promise<void>;
}

/** A workload of this scope that the runtime holds (container, volume or swarm service), by instance. */
export interface ManagedObject {
  instanceId: string;
  kind: string;
  /** Remove it (an orphan: its instance has no row). */
  remove(): Promise<void>;
}

/**
 * Where instances run: `docker` (containers on one engine, docker/*) or `swarm` (one swarm service per
 * instance, swarm/*), chosen by PROVISIONER_DRIVER. Both keep the same states, errors and crash rules:
 * every call is idempotent by instance id, so the reconciler can repeat any of them after a crash.
 */
export interface InstanceRuntime {
  readonly kind: 'docker' | 'swarm';
  /** Create the stopped workload (and its volume); returns the runtime's id for it. */
  create(row: InstanceRow, token: string): Promise<{ runtimeId: string; host?: string }>;
  /** Start it with fresh credentials. */
  start(id: string, creds: Credentials): Promise<void>;
  /** Credentials for the running agent, which waits for them (a claimed warm pool agent: domain/pool.ts); docker driver only. */
  handOver?(id: string, creds: Credentials): Promise<void>;
  /** The gateway token the workload was given, if it still exists. */
  token(id: string): Promise<string | undefined>;
  stop(id: string): Promise<void>;
  /** The light sleep (docker driver only; absent: instances sleep stopped): freeze the running workload. */
  freeze?(id: string): Promise<void>;
  /**
   * One step of pushing a frozen workload's memory out to swap, `stepMb` at most, towards `residentMb` resident
   * (docker/freeze.ts swapOutStep): `more` steps left, `done`, `refused` (no room: it keeps its memory), `awake`.
   */
  swapOut?(id: string, opts: { memoryMb: number; residentMb: number; stepMb: number }): Promise<'more' | 'done' | 'refused' | 'awake'>;
  /** Resume a frozen workload with its tier's memory limit. */
  thaw?(id: string, memoryMb: number): Promise<void>;
  /** The checkpointed sleep; absent: the deep sleep stops the workload. */
  readonly checkpoints?: InstanceCheckpoints;
  /** A workload booted on a burst of CPU (BOOT_CPUS): set to its tier's share (docker driver only). */
  clampCpus?(id: string, cpus: number): Promise<void>;
  /** Whether a connection or request waits on a frozen workload's agent port (it would hang until a wake). */
  awaited?(id: string): Promise<boolean>;
  /** Remove the workload (the volume stays: removeVolume). */
  remove(id: string): Promise<void>;
  /** Remove the volume (and what else outlives the workload), on the node `host` when the runtime has several. */
  removeVolume(id: string, host?: string | null): Promise<void>;
  inspect(id: string): Promise<RuntimeState>;
  logs(id: string, tail: number): Promise<string>;
  /** A follow stream of the logs with timestamps (docker's raw frames), from `since` (seconds) or the last `tail` lines; undefined when the workload is gone. */
  followLogs(id: string, from: { since?: string; tail?: number }): Promise<NodeJS.ReadableStream | undefined>;
  /** Everything of this scope the runtime holds, for the reconciler's orphan sweep. */
  managed(): Promise<ManagedObject[]>;
  /** The address the readiness watcher probes the instance's published port on. */
  probeHost(row: Pick<InstanceRow, 'id' | 'node_host'>): string;
  /**
   * Whether the instance's node has been back long enough to act on (swarm: ready for NODE_SETTLE_MS since it
   * last came back). A node whose engine is going away can look ready for a moment: an instance started there
   * then would collide with its own dying task.
   */
  nodeSettled?(row: Pick<InstanceRow, 'node_host'>): Promise<boolean>;
  /**
   * Backups (docker driver; absent on the swarm driver for now): hand `sink` a tar of the volume's files while
   * the agent is paused (its SQLite state does not change mid-copy); it resumes when sink settles.
   */
  exportData?(id: string, sink: (tar: NodeJS.ReadableStream) => Promise<void>): Promise<void>;
  /** Fill the instance's (new, empty) volume from a tar, before its workload is created. */
  importData?(row: InstanceRow, tar: NodeJS.ReadableStream): Promise<void>;
}
