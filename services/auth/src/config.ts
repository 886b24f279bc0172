import { z } from 'zod';
import { baseConfig, configInt } from '@agenthost/shared';

export const authConfig = baseConfig.extend({
  /** Ed25519 private key as a PKCS#8 PEM. When empty, a development key is generated once and kept in the auth schema. */
  AUTH_JWT_PRIVATE_KEY: z.string().default(''),
  /** Public JWKs (JSON array) of retired keys whose tokens are still valid, for rotation without logouts. */
  AUTH_JWT_PREVIOUS_KEYS: z.string().default('[]'),
  JWT_ISSUER: z.string().default('agenthost-auth'),
  JWT_AUDIENCE: z.string().default('agenthost-api'),
  TOKEN_TTL_SECONDS: configInt(24 * 3600),
  NONCE_TTL_SECONDS: configInt(300),
  /** Sign-In With Solana fields of the message the wallet signs. */
  SIWS_DOMAIN: z.string().default('localhost:8080'),
  SIWS_URI: z.string().default('http://localhost:8080'),
  SIWS_CHAIN_ID: z.string().default('solana:localnet'),
  SIWS_STATEMENT: z.string().default('Sign in to agenthost.'),
});

export type AuthConfig = z.output<typeof authConfig>;
