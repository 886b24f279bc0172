import type { ColumnType, Generated, GeneratedAlways } from 'kysely';

export type AuditAction = 'key_stored' | 'key_updated' | 'key_deleted' | 'key_retrieved';

export interface KeyvaultDB {
  /** An instance keyvault has issued credentials for: its owner, its secret's hash and the master key its key came from. */
  instances: {
    instance_id: string;
    user_id: string;
    secret_hash: Buffer;
    key_id: string;
    /** Random per issue, mixed into the key the instance is given (null: issued before epochs). */
    key_epoch: Buffer | null;
    issued_at: ColumnType<Date, Date | string | undefined, Date | string>;
    created_at: Generated<Date>;
  };
  /** Spec §2.3. encrypted_value = {"encrypted","iv","authTag","kid"} JSON; kid is derived from it. */
  api_keys: {
    id: Generated<string>;
    user_id: string;
    instance_id: string;
    key_name: string;
    encrypted_value: string;
    kid: GeneratedAlways<string>;
    created_at: Generated<Date>;
    updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
  };
  /** Spec §2.4, metadata only. */
  audit_log: {
    id: Generated<number>;
    at: Generated<Date>;
    user_id: string;
    instance_id: string;
    action: AuditAction;
    key_name: string;
    key_length: number;
    ip_address: string;
    user_agent: string;
    request_id: string;
  };
  /**
   * rate-limiter-flexible's counters of failed instance authentications (domain/limiter.ts), key "ip:<addr>" or
   * "instance:<id>". Only the library reads and writes it; named here so a test or an operator can look.
   */
  instance_auth_limits: {
    key: string;
    points: number;
    /** ms since the epoch. */
    expire: number | null;
  };
}
