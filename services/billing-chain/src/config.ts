import { z } from 'zod';
import { atRestKey, baseConfig, configBool, configInt } from '@agenthost/shared';

// Each setting's description is the text docs/configuration.md shows for it (deploy/config-doc.ts prints the page).
export const billingConfig = baseConfig.extend({
  SOLANA_RPC_URL: z.string().url().default('http://127.0.0.1:8899').describe('Solana JSON-RPC endpoint (the local devchain by default).'),
  SUBSCRIPTION_PROGRAM_ID: z
    .string()
    .default('')
    .meta({ description: 'The subscription program.', shownDefault: 'empty: asked from devchain (`devchain_getConfig`) at start' }),
  TREASURY: z
    .string()
    .default('')
    .meta({ description: "The program's treasury, which it pays; renew needs it.", shownDefault: 'empty: asked from devchain at start' }),
  SOLANA_COMMITMENT: z
    .enum(['confirmed', 'finalized'])
    .default('confirmed')
    .describe('The commitment a registration (and every read) requires: `finalized` to require finality.'),
  SUBSCRIPTION_CACHE_TTL_SECONDS: configInt(120).describe('A cached subscription younger than this is served as is; older ones are re-read from the chain.'),
  POLL_INTERVAL_SECONDS: z.coerce.number().positive().default(10).describe('Pick-up of program transactions and the renewal keeper run this often.'),
  KEEPER_SECRET_KEY: z.string().default('').meta({
    description: 'The keeper: fee payer and caller of `renew`, as a base58 secret key or a JSON byte array.',
    shownDefault: 'empty: generated once, kept in the billing schema sealed under `BILLING_DATA_KEY`',
  }),
  BILLING_DATA_KEY: z
    .string()
    .default('')
    .refine((v) => v === '' || 'key' in atRestKey(v), 'must be base64 of 32 bytes (e.g. `openssl rand -base64 32`)')
    .meta({
      description:
        'base64 of 32 bytes: seals (AES-256-GCM) the generated keeper key in the billing schema, so a database dump or its admin cannot ' +
        "spend the keeper's funds. deploy/start.sh makes `$AGENTHOST_STATE/secrets/billing-data-key`, readable by billing-chain's user only.",
      shownDefault: "empty: derived from billing-chain's NATS identity seed",
    }),
  KEEPER_AIRDROP: configBool(true).describe('Ask the RPC for an airdrop when the keeper runs low (devchain and devnet only; mainnet refuses).'),
  RPC_TIMEOUT_MS: configInt(1500).describe('Every RPC call gives up after this long: an unreachable chain is a fast 503, never a hang.'),
  BACKGROUND_JOBS: configBool(true).describe('`false` turns off pick-up and keeper (for tests that drive them by hand).'),
});

export type BillingConfig = z.output<typeof billingConfig>;
