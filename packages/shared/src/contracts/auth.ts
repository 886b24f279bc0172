import { z } from 'zod';
import { contract, userContract } from './contract.ts';
import { walletAddress, isoTime, uuid } from './common.ts';

/** The fields of our Sign-In With Solana message as a wallet's `solana:signIn` takes them (SolanaSignInInput). */
export const signInInput = z.object({
  domain: z.string(),
  address: walletAddress,
  statement: z.string(),
  uri: z.string(),
  version: z.literal('1'),
  chainId: z.string(),
  nonce: z.string(),
  issuedAt: isoTime,
  expirationTime: isoTime,
});

export const nonceCreate = contract(
  'auth.v1.nonce.create',
  z.object({ wallet_address: walletAddress }),
  z.object({ nonce: z.string(), message: z.string(), expires_at: isoTime, sign_in_input: signInInput }),
);

const base64 = z
  .string()
  .min(1)
  .max(12_000)
  .regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64');

/**
 * Either our message signed as we wrote it (wallet_address, signature_base58, nonce), or a Sign-In With Solana
 * message the wallet built (`solana:signIn`'s output: account, signedMessage and signature, the bytes in base64;
 * also as signed_message), whose fields are then verified one by one. Values are only shape-checked here: a wrong
 * one is a refused sign-in (401), not a 400.
 */
export const login = contract(
  'auth.v1.session.login',
  z
    .object({
      wallet_address: z.string().min(1).max(100).optional(),
      signature_base58: z.string().min(1).max(200).optional(),
      nonce: z.string().min(1).max(200).optional(),
      account: z.object({ address: z.string().min(1).max(100) }).optional(),
      signedMessage: base64.optional(),
      signed_message: base64.optional(),
      /** base64 (as `solana:signIn` returns it); signature_base58 is accepted instead. */
      signature: base64.optional(),
    })
    .superRefine((b, ctx) => {
      const walletBuilt = b.signedMessage !== undefined || b.signed_message !== undefined;
      const missing = walletBuilt
        ? [...(b.account || b.wallet_address ? [] : ['account']), ...(b.signature || b.signature_base58 ? [] : ['signature'])]
        : (['wallet_address', 'signature_base58', 'nonce'] as const).filter((k) => !b[k]);
      for (const k of missing) ctx.addIssue({ code: 'custom', path: [k], message: 'is required' });
    })
    // The same rule for the OpenAPI document (JSON Schema cannot read the refinement above): one of the two shapes.
    .meta({
      anyOf: [
        { required: ['wallet_address', 'signature_base58', 'nonce'] },
        {
          allOf: [
            { anyOf: [{ required: ['signedMessage'] }, { required: ['signed_message'] }] },
            { anyOf: [{ required: ['account'] }, { required: ['wallet_address'] }] },
            { anyOf: [{ required: ['signature'] }, { required: ['signature_base58'] }] },
          ],
        },
      ],
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
