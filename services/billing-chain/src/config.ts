import { z } from 'zod';
import { atRestKey, baseConfig, configBool, configInt } from '@agenthost/shared';

export const billingConfig = baseConfig.extend({
  /** Solana JSON-RPC endpoint (devchain locally). */
  SOLANA_RPC_URL: z.string().url().default('http://127.0.0.1:8899'),
  /** The subscription program. Empty: asked from devchain (devchain_getConfig) at start. */
  SUBSCRIPTION_PROGRAM_ID: z.string().default(''),
  /** Treasury the program pays; renew needs it. Empty: asked from devchain at start. */
  TREASURY: z.string().default(''),
  /** Commitment a registration (and every read) requires: confirmed, or finalized where configured. */
  SOLANA_COMMITMENT: z.enum(['confirmed', 'finalized']).default('confirmed'),
  /** A cached subscription younger than this is served as is; older ones are re-read from the chain. */
  SUBSCRIPTION_CACHE_TTL_SECONDS: configInt(120),
  /** Pick-up of program transactions and the renewal keeper run this often. */
  POLL_INTERVAL_SECONDS: z.coerce.number().positive().default(10),
  /** Fee payer and caller of renew: base58 secret key or a JSON byte array. Empty: generated once, kept in the billing schema. */
  KEEPER_SECRET_KEY: z.string().default(''),
  /**
   * base64 of 32 bytes (or BILLING_DATA_KEY_FILE): seals the generated keeper key in the billing schema. Empty: a key
   * derived from billing-chain's NATS identity seed. deploy/start.sh makes $AGENTHOST_STATE/secrets/billing-data-key.
   */
  BILLING_DATA_KEY: z
    .string()
    .default('')
    .refine((v) => v === '' || 'key' in atRestKey(v), 'must be base64 of 32 bytes (e.g. `openssl rand -base64 32`)'),
  /** Ask the RPC for an airdrop when the keeper runs low (devchain/devnet only; mainnet refuses). */
  KEEPER_AIRDROP: configBool(true),
  /** Every RPC call gives up after this long: an unreachable chain is a fast 503, never a hang. */
  RPC_TIMEOUT_MS: configInt(1500),
  /** Turn off pick-up and keeper (for tests that drive them by hand). */
  BACKGROUND_JOBS: configBool(true),
});

export type BillingConfig = z.output<typeof billingConfig>;
