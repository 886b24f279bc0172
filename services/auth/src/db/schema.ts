import type { Generated } from 'kysely';

export interface AuthDB {
  users: { id: Generated<string>; wallet_address: string; created_at: Generated<Date>; last_login_at: Date | null };
  nonces: {
    nonce: string;
    wallet_address: string;
    issued_at: Date;
    expires_at: Date;
    used_at: Date | null;
    /** When the row was made (clock_timestamp): orders a wallet's nonces within one second of issued_at. */
    created_at: Generated<Date>;
  };
  revoked_tokens: { jti: string; user_id: string; expires_at: Date };
  used_sign_ins: { signature_hash: string; expires_at: Date };
}
