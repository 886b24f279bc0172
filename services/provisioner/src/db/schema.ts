import type { ColumnType, Generated, Selectable } from 'kysely';

type InstanceStatus = 'provisioning' | 'running' | 'stopped' | 'failed' | 'sleeping';
type ExitKind = 'oom_killed' | 'signal' | 'exit';
/** How far the current operation on an instance got (read by the reconciler after a crash). */
export type Step = 'leased' | 'container' | 'done' | 'recreating' | 'stopping' | 'sleeping' | 'deleting' | 'backoff';

type NullableTime = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

interface InstancesTable {
  id: string;
  user_id: string;
  name: string;
  framework: string;
  version: string;
  image: string;
  tier: string;
  memory_mb: number;
  cpus: number;
  pids: number;
  port: number;
  status: InstanceStatus;
  step: Step;
  generation: Generated<number>;
  failure_reason: string | null;
  access_token_hash: string;
  container_id: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  started_at: NullableTime;
  ready_deadline: NullableTime;
  last_activity: Generated<Date>;
  storage_bytes: Generated<number>;
  deleting_at: NullableTime;
  /** The owner's wallet (null for rows made before it was recorded). */
  wallet_address: ColumnType<string | null, string | null | undefined, string | null>;
  /** The address of the node the instance is pinned to (swarm driver; null on one engine). */
  node_host: ColumnType<string | null, string | null | undefined, string | null>;
  /** Crashes of the agent the provisioner restarted it after, over the instance's life. */
  restarts: Generated<number>;
  /** Crashes in a row, each within RESTART_STABLE_SECONDS of its start: the backoff's exponent. */
  crash_streak: Generated<number>;
  /** Boots of the current start that exited before the agent was ready and were booted again (BOOT_RETRIES). */
  boot_retries: Generated<number>;
  last_exit_reason: string | null;
  /** What the last exit was: the kernel's OOM killer, a signal, or the agent's own exit. */
  last_exit_kind: ExitKind | null;
  /** Times the kernel killed the agent for exceeding its memory limit, over the instance's life. */
  oom_kills: Generated<number>;
  last_exit_at: NullableTime;
  /** step 'backoff': when the crashed agent is started again. */
  next_restart_at: NullableTime;
  /** The local image ID (sha256:…) the version resolved to; containers are created from it (null: made before pinning). */
  image_digest: ColumnType<string | null, string | null | undefined, string | null>;
  /** The last upgrade: upgrading until the agent is ready on the new image, then upgraded or rolled_back (with upgrade_reason). */
  upgrade_state: ColumnType<UpgradeState | null, UpgradeState | null | undefined, UpgradeState | null>;
  upgrade_reason: ColumnType<string | null, string | null | undefined, string | null>;
  /** What the last upgrade moved away from (the rollback target while it is upgrading). */
  upgrade_from_version: ColumnType<string | null, string | null | undefined, string | null>;
  upgrade_from_image: ColumnType<string | null, string | null | undefined, string | null>;
  upgrade_from_digest: ColumnType<string | null, string | null | undefined, string | null>;
  /** The version the last upgrade moved to (or tried to). */
  upgrade_to_version: ColumnType<string | null, string | null | undefined, string | null>;
  /** When an edge last reported traffic to the instance (idle sleep); null: none reported yet. */
  traffic_at: NullableTime;
  /** A sleeping instance: how deeply (frozen, swapped, checkpointed, stopped); null otherwise. */
  sleep_depth: ColumnType<SleepDepth | null, SleepDepth | null | undefined, SleepDepth | null>;
  /** Set by a wake that could not resume the paused agent (it boots instead); the status outbox carries it once. */
  wake_warning: ColumnType<string | null, string | null | undefined, string | null>;
  /** A checkpointed instance: the id its sealed image is bound to (docker/checkpoint.ts); null otherwise. */
  checkpoint_id: ColumnType<string | null, string | null | undefined, string | null>;
}

export type SleepDepth = 'frozen' | 'swapped' | 'checkpointed' | 'stopped';

export type UpgradeState = 'upgrading' | 'upgraded' | 'rolled_back';

/** The outbox of status changes (written by a trigger on instances; emptied by the status relay). */
export interface StatusEventsTable {
  seq: Generated<number>;
  instance_id: string;
  user_id: string;
  status: InstanceStatus;
  failure_reason: string | null;
  generation: number;
  at: Generated<Date>;
  /** The instance's restarts so far; with a crash (step backoff) its exit reason and the next restart. */
  restarts: Generated<number>;
  exit_reason: string | null;
  exit_kind: ExitKind | null;
  next_restart_at: Date | null;
  /** A change of the instance's upgrade_state (with the reason of a rollback). */
  upgrade: ColumnType<UpgradeState | null, UpgradeState | null | undefined, UpgradeState | null>;
  upgrade_reason: ColumnType<string | null, string | null | undefined, string | null>;
  sleep_depth: ColumnType<SleepDepth | null, SleepDepth | null | undefined, SleepDepth | null>;
  wake_warning: ColumnType<string | null, string | null | undefined, string | null>;
}

/** A backup archive (the file <BACKUP_DIR>/<scope>/<id>.bak); rows outlive their instance. */
interface BackupsTable {
  id: string;
  user_id: string;
  instance_id: string;
  kind: 'manual' | 'scheduled';
  size_bytes: number;
  /** What the instance ran, so a clone of a deleted instance runs the same agent. */
  framework: string;
  version: string;
  created_at: Generated<Date>;
}

export interface ProvisionerDB {
  instances: InstancesTable;
  backups: BackupsTable;
  status_events: StatusEventsTable;
}

export type InstanceRow = Selectable<InstancesTable>;
export type BackupRow = Selectable<BackupsTable>;
