import { z } from 'zod';
import { baseConfig, configInt } from '@agenthost/shared';

// Each setting's description is the text docs/configuration.md shows for it (deploy/config-doc.ts prints the page).
export const authConfig = baseConfig
  .extend({
    AUTH_JWT_PRIVATE_KEY: z.string().default('').meta({
      description: 'The Ed25519 private key (PKCS#8 PEM) that signs access tokens, given as the PEM itself; better in a file (`AUTH_JWT_PRIVATE_KEY_FILE`).',
      shownDefault: 'required: this or `AUTH_JWT_PRIVATE_KEY_FILE`',
    }),
    AUTH_JWT_PRIVATE_KEY_FILE: z
      .string()
      .default('')
      .meta({
        description:
          'The path of a file only auth can read that holds the Ed25519 PKCS#8 PEM that signs access tokens; the key is never stored in the ' +
          'database. deploy/start.sh makes `$AGENTHOST_STATE/secrets/auth-jwt.pem`, root only, and points auth alone at it.',
        shownDefault: 'required: this or `AUTH_JWT_PRIVATE_KEY`',
      }),
    AUTH_JWT_PREVIOUS_KEYS: z
      .string()
      .default('[]')
      .meta({ accepts: 'JSON', description: 'Public JWKs (a JSON array) of retired keys whose tokens are still valid, for rotation without logouts.' }),
    JWT_ISSUER: z.string().default('agenthost-auth').describe("The issuer claim of the tokens auth signs (the gateway's `JWT_ISSUER` must match)."),
    JWT_AUDIENCE: z.string().default('agenthost-api').describe("The audience claim of the tokens auth signs (the gateway's `JWT_AUDIENCE` must match)."),
    TOKEN_TTL_SECONDS: configInt(24 * 3600).describe('How long an access token is valid.'),
    NONCE_TTL_SECONDS: configInt(300).describe('How long a sign-in nonce is valid; a sign-in message without one must have been issued within this time.'),
    NONCES_OUTSTANDING_PER_WALLET: configInt(5).describe(
      'Unused, unexpired nonces a wallet may hold: issuing one more drops its oldest (the gateway limits the rate).',
    ),
    NONCE_PURGE_INTERVAL_SECONDS: configInt(60).describe('How often expired nonces (used or not) are deleted.'),
    EDGE_DOMAIN: z
      .string()
      .min(1)
      .default('agenthost.localhost')
      .describe(
        "The public edge's domain, as deploy gives every service (deploy/env.sh, the swarm stack): the dashboard's origin, and so the default " +
          'domain users sign in for.',
      ),
    EDGE_HTTPS_PORT: configInt(443).describe("The public edge's HTTPS port (with `EDGE_DOMAIN`, the dashboard's origin)."),
    SIWS_DOMAIN: z
      .string()
      .optional()
      .meta({
        description:
          'Sign-In With Solana: the domain of the message the wallet signs. It must name the page users sign in on, or a wallet refuses the ' +
          "message and SIWS's phishing check (the wallet compares the domain with the page) means nothing.",
        shownDefault: "the edge's host: `EDGE_DOMAIN`, with `:EDGE_HTTPS_PORT` when not 443",
      }),
    SIWS_URI: z
      .string()
      .optional()
      .meta({ description: 'Sign-In With Solana: the URI of the message the wallet signs.', shownDefault: "the edge's origin: `https://` and its host" }),
    SIWS_CHAIN_ID: z
      .string()
      .regex(/^(solana:)?(mainnet|testnet|devnet|localnet)$/, 'must be mainnet, testnet, devnet or localnet (optionally solana:…)')
      .default('localnet')
      .describe(
        'Sign-In With Solana: the chain id of the message, one the SIWS format allows (`mainnet`, `testnet`, `devnet` or `localnet`, optionally with the `solana:` prefix).',
      ),
    SIWS_STATEMENT: z.string().default('Sign in to agenthost.').describe('Sign-In With Solana: the statement of the message.'),
    SIWS_DOMAINS: z
      .string()
      .default('')
      .meta({
        accepts: 'comma-separated list',
        description:
          'Domains (`host[:port]`) that a sign-in message built by the wallet may name, as domain and as the host of its URI: the ' +
          "dashboard's and the API's (a wallet takes the domain from the page that asks it to sign in).",
        shownDefault: 'empty: `SIWS_DOMAIN` alone',
      }),
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
