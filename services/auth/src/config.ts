import { z } from 'zod';
import { baseConfig, configInt } from '@agenthost/shared';

export const authConfig = baseConfig
  .extend({
    /** Ed25519 private key as a PKCS#8 PEM, or (better) the path of a file only auth can read that holds it. One is required. */
    AUTH_JWT_PRIVATE_KEY: z.string().default(''),
    AUTH_JWT_PRIVATE_KEY_FILE: z.string().default(''),
    /** Public JWKs (JSON array) of retired keys whose tokens are still valid, for rotation without logouts. */
    AUTH_JWT_PREVIOUS_KEYS: z.string().default('[]'),
    JWT_ISSUER: z.string().default('agenthost-auth'),
    JWT_AUDIENCE: z.string().default('agenthost-api'),
    TOKEN_TTL_SECONDS: configInt(24 * 3600),
    NONCE_TTL_SECONDS: configInt(300),
    /** Unused, unexpired nonces a wallet may hold: issuing one more drops its oldest (the gateway limits the rate). */
    NONCES_OUTSTANDING_PER_WALLET: configInt(5),
    /** Expired nonces (used or not) are deleted this often. */
    NONCE_PURGE_INTERVAL_SECONDS: configInt(60),
    /** Sign-In With Solana fields of the message the wallet signs. */
    SIWS_DOMAIN: z.string().default('localhost:8080'),
    SIWS_URI: z.string().default('http://localhost:8080'),
    /** A chain id the SIWS format allows (mainnet | testnet | devnet | localnet, optionally with the solana: prefix). */
    SIWS_CHAIN_ID: z
      .string()
      .regex(/^(solana:)?(mainnet|testnet|devnet|localnet)$/, 'must be mainnet, testnet, devnet or localnet (optionally solana:…)')
      .default('localnet'),
    SIWS_STATEMENT: z.string().default('Sign in to agenthost.'),
    /**
     * Domains (host[:port], comma-separated) a wallet-built sign-in message may name, e.g. the dashboard's and the
     * API's; empty: SIWS_DOMAIN alone. A wallet sets the domain from the page that asks it to sign in.
     */
    SIWS_DOMAINS: z.string().default(''),
  })
  .refine((c) => c.AUTH_JWT_PRIVATE_KEY.trim() !== '' || c.AUTH_JWT_PRIVATE_KEY_FILE !== '', {
    message: 'AUTH_JWT_PRIVATE_KEY_FILE (or AUTH_JWT_PRIVATE_KEY) is required: the Ed25519 key that signs access tokens (deploy/start.sh makes one)',
    path: ['AUTH_JWT_PRIVATE_KEY_FILE'],
  });

export type AuthConfig = z.output<typeof authConfig>;
