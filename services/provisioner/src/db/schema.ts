import type { ColumnType, Generated, Selectable } from 'kysely';

export type InstanceStatus = 'provisioning' | 'running' | 'stopped' | 'failed';
/** How far the current operation on an instance got (read by the reconciler after a crash). */
export type Step = 'leased' | 'container' | 'done' | 'recreating' | 'stopping' | 'deleting';

type NullableTime = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface InstancesTable {
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
}

/** The outbox of status changes (written by a trigger on instances; emptied by the status relay). */
export interface StatusEventsTable {
  seq: Generated<number>;
  instance_id: string;
  user_id: string;
  status: InstanceStatus;
  failure_reason: string | null;
  generation: number;
  at: Generated<Date>;
}

export interface ProvisionerDB {
  instances: InstancesTable;
  status_events: StatusEventsTable;
}

export type InstanceRow = Selectable<InstancesTable>;
