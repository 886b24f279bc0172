/** Tables of the gateway's own schema. */
export interface GatewayDB {
  usage_counters: {
    user_id: string;
    window: string;
    window_start: Date;
    used: number;
  };
}
