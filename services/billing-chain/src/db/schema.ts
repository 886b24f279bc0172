import type { ColumnType, Generated } from 'kysely';

/** Tables of the billing schema. */
export interface BillingDB {
  /** The cache of on-chain subscription records, one per wallet. */
  subscriptions: {
    wallet_address: string;
    /** Known once the wallet registered or asked for its status; null for picked-up records. */
    user_id: string | null;
    pda: string;
    tier: number;
    expires_at: Date;
    /** is_active as stored on chain (the view also requires expires_at in the future). */
    chain_active: boolean;
    /** A successful cancel not followed by a subscribe (program-private state, read from the history). */
    cancelled: boolean;
    /** Lamports of the PDA (rent + prepaid balance). */
    lamports: number;
    refreshed_at: Date;
    /** The expires_at last announced as expiring within 3 days (events.subscription.expiring). */
    expiry_warned_for: ColumnType<Date | null, Date | null | undefined, Date | null>;
    updated_at: Generated<Date>;
  };
  /** Every signature accepted by register: a signature registers at most once. */
  used_signatures: {
    signature: string;
    wallet_address: string;
    user_id: string;
    tier: number;
    slot: number;
    created_at: Generated<Date>;
  };
  /** Cursors of the program-signature pick-up (newest processed signature). */
  cursors: { name: string; signature: string; slot: number; updated_at: Generated<Date> };
  /** Leader leases so one replica at a time runs the pick-up and the keeper. */
  leases: { name: string; holder: string; expires_at: Date };
  /** The generated development keeper key (only when KEEPER_SECRET_KEY is not set), sealed (domain/keeper-key.ts). */
  keeper_keys: { id: number; sealed_key: string; created_at: Generated<Date> };
}
