import { randomBytes, randomUUID } from 'node:crypto';
import bs58 from 'bs58';
import { SignJWT } from 'jose';
import { sql, type Kysely } from 'kysely';
import nacl from 'tweetnacl';
import { AppError, type contracts } from '@agenthost/shared';
import type { z } from 'zod';
import type { AuthConfig } from '../config.ts';
import type { AuthDB } from '../db/schema.ts';
import type { SigningKey } from './keys.ts';
import { signInMessage, type SignInFields } from './siws.ts';
import { verifyWalletSignIn } from './wallet-sign-in.ts';

type LoginInput = z.output<typeof contracts.auth.login.input>;

export interface SessionDeps {
  db: Kysely<AuthDB>;
  config: AuthConfig;
  key: SigningKey;
  now?: () => Date;
}

const decodeBase58 = (s: string): Uint8Array | null => {
  try {
    return bs58.decode(s);
  } catch {
    return null;
  }
};

function fieldsFor(config: AuthConfig, row: { nonce: string; wallet_address: string; issued_at: Date; expires_at: Date }): SignInFields {
  return {
    domain: config.SIWS_DOMAIN,
    address: row.wallet_address,
    statement: config.SIWS_STATEMENT,
    uri: config.SIWS_URI,
    version: '1',
    chainId: config.SIWS_CHAIN_ID,
    nonce: row.nonce,
    issuedAt: row.issued_at.toISOString(),
    expirationTime: row.expires_at.toISOString(),
  };
}

const messageFor = (config: AuthConfig, row: Parameters<typeof fieldsFor>[1]): string => signInMessage(fieldsFor(config, row));

/** A single-use nonce (128 bits from the CSPRNG) and the message to sign, stored server-side. */
export async function createNonce(deps: SessionDeps, walletAddress: string) {
  const pub = decodeBase58(walletAddress);
  if (pub?.length !== 32)
    throw new AppError('VALIDATION_FAILED', 'wallet_address: must be a 32-byte base58 public key', { details: { field: 'wallet_address' } });
  const issuedAt = new Date(Math.floor((deps.now?.() ?? new Date()).getTime() / 1000) * 1000);
  const row = {
    nonce: bs58.encode(randomBytes(16)),
    wallet_address: walletAddress,
    issued_at: issuedAt,
    expires_at: new Date(issuedAt.getTime() + deps.config.NONCE_TTL_SECONDS * 1000),
    used_at: null,
  };
  await deps.db.transaction().execute(async (tx) => {
    await tx.insertInto('nonces').values(row).execute();
    // A wallet keeps only its newest outstanding nonces: a flood for one wallet replaces rows, never adds them.
    const keep = tx
      .selectFrom('nonces')
      .select('nonce')
      .where('wallet_address', '=', walletAddress)
      .where('used_at', 'is', null)
      .orderBy('created_at', 'desc')
      .limit(deps.config.NONCES_OUTSTANDING_PER_WALLET);
    await tx.deleteFrom('nonces').where('wallet_address', '=', walletAddress).where('used_at', 'is', null).where('nonce', 'not in', keep).execute();
  });
  // sign_in_input: the same fields for a wallet's solana:signIn, which builds (and shows) the message itself.
  return { nonce: row.nonce, message: messageFor(deps.config, row), expires_at: row.expires_at.toISOString(), sign_in_input: fieldsFor(deps.config, row) };
}

const nonceRefused = () => new AppError('NONCE_INVALID', 'Nonce is unknown, already used or expired');

/** Of two concurrent logins with one nonce exactly one wins. */
async function consumeNonce(deps: SessionDeps, nonce: string): Promise<void> {
  const consumed = await deps.db
    .updateTable('nonces')
    .set({ used_at: sql`now()` })
    .where('nonce', '=', nonce)
    .where('used_at', 'is', null)
    .where('expires_at', '>', sql<Date>`now()`)
    .returning('nonce')
    .executeTakeFirst();
  if (!consumed) throw nonceRefused();
}

/** Our message, signed as we wrote it: rebuilt from the stored nonce row, never from text the client sends. */
async function signedOurMessage(deps: SessionDeps, input: LoginInput): Promise<string> {
  const wallet = input.wallet_address!;
  const row = await deps.db.selectFrom('nonces').selectAll().where('nonce', '=', input.nonce!).executeTakeFirst();
  if (!row || row.used_at || row.expires_at.getTime() <= Date.now()) throw nonceRefused();
  if (row.wallet_address !== wallet) throw new AppError('INVALID_SIGNATURE');
  const pub = decodeBase58(wallet);
  const sig = decodeBase58(input.signature_base58!);
  if (pub?.length !== 32 || !sig || sig.length !== 64) throw new AppError('INVALID_SIGNATURE');
  if (!nacl.sign.detached.verify(new TextEncoder().encode(messageFor(deps.config, row)), sig, pub)) throw new AppError('INVALID_SIGNATURE');
  await consumeNonce(deps, row.nonce);
  return wallet;
}

/**
 * A message the wallet built (solana:signIn): every field verified, then our nonce consumed. The nonce may have been
 * asked for another account of the same wallet (the user picked another one when signing). A message the wallet
 * built from an empty input has no nonce: it must have been issued within the nonce lifetime, and is accepted once.
 */
async function signedWalletMessage(deps: SessionDeps, input: LoginInput, signedMessage: string): Promise<string> {
  const signer = input.account?.address ?? input.wallet_address!;
  if (input.account && input.wallet_address && input.account.address !== input.wallet_address) throw new AppError('INVALID_SIGNATURE');
  const v = verifyWalletSignIn(deps.config, {
    signer,
    signedMessageBase64: signedMessage,
    ...(input.signature ? { signatureBase64: input.signature } : {}),
    ...(input.signature_base58 ? { signatureBase58: input.signature_base58 } : {}),
  });
  if (v.nonce !== undefined) {
    await consumeNonce(deps, v.nonce);
    return signer;
  }
  const ttlMs = deps.config.NONCE_TTL_SECONDS * 1000;
  if (!v.issuedAt || v.issuedAt.getTime() < Date.now() - ttlMs) {
    throw new AppError(
      'NONCE_INVALID',
      `A sign-in message without our nonce must say when it was issued, within the last ${deps.config.NONCE_TTL_SECONDS} s; or sign the sign_in_input of GET /auth/nonce`,
    );
  }
  const fresh = await deps.db
    .insertInto('used_sign_ins')
    .values({ signature_hash: v.signatureHash, expires_at: new Date(v.issuedAt.getTime() + ttlMs) })
    .onConflict((c) => c.doNothing())
    .returning('signature_hash')
    .executeTakeFirst();
  if (!fresh) throw new AppError('NONCE_INVALID', 'This signed sign-in message was already used');
  return signer;
}

/** Verify the sign-in (our message, or one the wallet built), upsert the user, and sign an access token. */
export async function login(deps: SessionDeps, input: LoginInput) {
  const walletBuilt = input.signedMessage ?? input.signed_message;
  const wallet = walletBuilt ? await signedWalletMessage(deps, input, walletBuilt) : await signedOurMessage(deps, input);

  const user = await deps.db
    .insertInto('users')
    .values({ wallet_address: wallet, last_login_at: sql`now()` })
    .onConflict((c) => c.column('wallet_address').doUpdateSet({ last_login_at: sql`now()` }))
    .returning('id')
    .executeTakeFirstOrThrow();

  const now = Math.floor(Date.now() / 1000);
  const exp = now + deps.config.TOKEN_TTL_SECONDS;
  const token = await new SignJWT({ wallet })
    .setProtectedHeader({ alg: 'EdDSA', kid: deps.key.kid, typ: 'at+jwt' })
    .setIssuer(deps.config.JWT_ISSUER)
    .setAudience(deps.config.JWT_AUDIENCE)
    .setSubject(user.id)
    .setIssuedAt(now)
    .setExpirationTime(exp)
    .setJti(randomUUID())
    .sign(deps.key.privateKey);
  return { token, wallet_address: wallet, user_id: user.id, expires_at: new Date(exp * 1000).toISOString() };
}

/**
 * Expired nonces, used or not, are deleted (every NONCE_PURGE_INTERVAL_SECONDS): they can open nothing, and a flood of
 * nonce requests must not leave rows behind for long. Logins are recorded by the users table and the logs.
 */
export async function pruneNonces(db: Kysely<AuthDB>): Promise<number> {
  const r = await db.deleteFrom('nonces').where('expires_at', '<', sql<Date>`now()`).executeTakeFirst();
  await db.deleteFrom('used_sign_ins').where('expires_at', '<', sql<Date>`now()`).execute();
  return Number(r.numDeletedRows);
}
