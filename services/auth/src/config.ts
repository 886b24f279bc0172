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
    /**
     * The public edge's domain and HTTPS port, as deploy gives every service (deploy/env.sh, the swarm stack): the
     * dashboard's origin, and so the default domain users sign in for.
     */
    EDGE_DOMAIN: z.string().min(1).default('agenthost.localhost'),
    EDGE_HTTPS_PORT: configInt(443),
    /**
     * Sign-In With Solana fields of the message the wallet signs. Unset or empty: the edge's host (with its port when not 443)
     * and https origin, what a wallet sees as the page's. They must name the page users sign in on, or a wallet
     * refuses the message and SIWS's phishing check (the wallet compares the domain with the page) means nothing.
     */
    SIWS_DOMAIN: z.string().optional(),
    SIWS_URI: z.string().optional(),
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
  })
  .transform((c) => {
    const edgeHost = c.EDGE_HTTPS_PORT === 443 ? c.EDGE_DOMAIN : `${c.EDGE_DOMAIN}:${c.EDGE_HTTPS_PORT}`;
    return { ...c, SIWS_DOMAIN: c.SIWS_DOMAIN || edgeHost, SIWS_URI: c.SIWS_URI || `https://${edgeHost}` };
  });

export type AuthConfig = z.output<typeof authConfig>;
