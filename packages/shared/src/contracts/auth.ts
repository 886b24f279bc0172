import { z } from 'zod';
import { contract, userContract } from './contract.ts';
import { walletAddress, isoTime, uuid } from './common.ts';

export const nonceCreate = contract(
  'auth.v1.nonce.create',
  z.object({ wallet_address: walletAddress }),
  z.object({ nonce: z.string(), message: z.string(), expires_at: isoTime }),
);

export const login = contract(
  'auth.v1.session.login',
  // Login fields are only length-checked: any wrong value is an invalid signature (401), not a 400.
  z.object({
    wallet_address: z.string().min(1).max(100),
    signature_base58: z.string().min(1).max(200),
    nonce: z.string().min(1).max(200),
  }),
  z.object({ token: z.string(), wallet_address: walletAddress, user_id: uuid, expires_at: isoTime }),
);

const jwk = z.object({ kty: z.literal('OKP'), crv: z.literal('Ed25519'), x: z.string(), kid: z.string(), alg: z.literal('EdDSA'), use: z.literal('sig') });

/** The public keys that verify access tokens (current first, then previous ones still valid). */
export const jwks = contract('auth.v1.keys.list', z.object({}), z.object({ keys: z.array(jwk) }));

/** Claims carried by every access token, besides iss/aud/exp/iat/jti. sub = user_id. */
export const accessClaims = z.object({ sub: uuid, wallet: walletAddress });

/** A token's id (jti) and expiry (seconds since the epoch) on the deny-list. */
export const revokedToken = z.object({ jti: z.string().min(1).max(200), exp: z.number().int() });

/** POST /auth/logout: put the caller's token on the deny-list (kept until it expires). Idempotent. */
export const revoke = userContract('auth.v1.tokens.revoke', revokedToken.extend({ user_id: uuid }), z.object({ success: z.boolean() }));

/** The deny-list as it stands (tokens not yet expired); gateways load it at start. */
export const revokedList = contract('auth.v1.tokens.revoked', z.object({}), z.object({ tokens: z.array(revokedToken) }));

/** Core NATS broadcast of one revocation (payload: revokedToken); every gateway replica applies it. */
export const TOKEN_REVOKED_SUBJECT = 'broadcast.auth.token_revoked';
