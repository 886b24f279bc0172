/** Tables of the gateway's own schema. */
export interface GatewayDB {
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
}
