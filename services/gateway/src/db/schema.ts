import type { ColumnType } from 'kysely';

/** Tables of the gateway's own schema. */
export interface GatewayDB {
  /** Answers kept per user and Idempotency-Key (http/idempotency.ts); status and body null while in flight. */
  idempotency_keys: {
    user_id: string;
    key: string;
    /** sha256 of method, path and body: the same key with another request is refused. */
    fingerprint: string;
    started_at: ColumnType<Date, Date | undefined, never>;
    expires_at: Date;
    status: number | null;
    body: string | null;
  };
  /** rate-limiter-flexible's counters of the sign-in limits (auth/sign-in-limits.ts). */
  sign_in_limits: {
    key: string;
    points: number;
    /** ms since the epoch. */
    expire: number | null;
  };
  usage_counters: {
    user_id: string;
    /** 'day' or 'minute'. */
    window: string;
    window_start: Date;
    /** Requests granted to replicas in this window (leased blocks included). */
    used: number;
    /** How much the last lease granted (read back by the lease statement). */
    last_grant: number;
  };
  /** Live replicas: a stale heartbeat means the replica's leases may be reclaimed. */
  usage_replicas: {
    replica_id: string;
    heartbeat_at: Date;
  };
  /** What each replica holds of a window, and how much of it it has served. */
  usage_leases: {
    replica_id: string;
    user_id: string;
    window: string;
    window_start: Date;
    granted: number;
    served: number;
  };
  /** The served count of each lease a reclaim took back, for the replica if it comes back (domain/quota/reclaim.ts). */
  usage_reclaimed: {
    replica_id: string;
    user_id: string;
    window: string;
    window_start: Date;
    served: number;
    reclaimed_at: ColumnType<Date, Date | undefined, never>;
  };
  /** Each user's webhook endpoints (domain/webhooks); secrets sealed with GATEWAY_DATA_KEY. */
  webhook_endpoints: {
    id: string;
    user_id: string;
    url: string;
    events: string[];
    description: string | null;
    secret_sealed: string;
    /** The secret before the last rotation, signing too until previous_expires_at. */
    previous_secret_sealed: string | null;
    previous_expires_at: Date | null;
    created_at: ColumnType<Date, Date | undefined, never>;
  };
  /** Open client streams (domain/stream-slots.ts); user_id null for an instance's own key watch. */
  stream_slots: {
    id: string;
    replica_id: string;
    user_id: string | null;
    instance_id: string;
    kind: string;
    expires_at: Date;
  };
  /** Instance deletions read from the event stream, with their stream sequence (domain/instance-deletions.ts). */
  instance_deletions: {
    instance_id: string;
    user_id: string;
    seq: ColumnType<string, number, number>;
    deleted_at: Date;
  };
  /** One event for one endpoint: retried with backoff until delivered or give_up_at. */
  webhook_deliveries: {
    /** The webhook-id header: the same on every attempt. */
    id: string;
    webhook_id: string;
    event_type: string;
    /** The exact body signed and sent. */
    payload: string;
    /** pending, delivered or failed. */
    status: string;
    attempts: ColumnType<number, number | undefined, number>;
    next_attempt_at: Date | null;
    give_up_at: Date;
    last_status_code: number | null;
    last_error: string | null;
    created_at: ColumnType<Date, Date | undefined, never>;
    delivered_at: Date | null;
  };
}
