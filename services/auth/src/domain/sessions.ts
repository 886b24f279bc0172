import { randomBytes, randomUUID } from 'node:crypto';
import bs58 from 'bs58';
import { SignJWT } from 'jose';
import { sql, type Kysely } from 'kysely';
import nacl from 'tweetnacl';
import { AppError } from '@agenthost/shared';
import type { AuthConfig } from '../config.ts';
import type { AuthDB } from '../db/schema.ts';
import type { SigningKey } from './keys.ts';
import { signInMessage } from './siws.ts';

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

function messageFor(config: AuthConfig, row: { nonce: string; wallet_address: string; issued_at: Date; expires_at: Date }): string {
  return signInMessage({
    domain: config.SIWS_DOMAIN,
    address: row.wallet_address,
    statement: config.SIWS_STATEMENT,
    uri: config.SIWS_URI,
    version: '1',
    chainId: config.SIWS_CHAIN_ID,
    nonce: row.nonce,
    issuedAt: row.issued_at.toISOString(),
    expirationTime: row.expires_at.toISOString(),
  });
}

/** A single-use nonce (128 bits from the CSPRNG) and the message to sign, stored server-side. */
export async function createNonce(deps: SessionDeps, walletAddress: string) {
  const pub = decodeBase58(walletAddress);
  if (!pub || pub.length !== 32) throw new AppError('VALIDATION_FAILED', 'wallet_address: must be a 32-byte base58 public key', { details: { field: 'wallet_address' } });
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
  return { nonce: row.nonce, message: messageFor(deps.config, row), expires_at: row.expires_at.toISOString() };
}

/**
 * Verify the signature over the message we issued, consume the nonce atomically (of two concurrent
 * logins with one nonce exactly one wins), upsert the user, and sign an access token.
 */
export async function login(deps: SessionDeps, input: { wallet_address: string; signature_base58: string; nonce: string }) {
  const refused = () => new AppError('NONCE_INVALID', 'Nonce is unknown, already used or expired');
  const badSig = () => new AppError('INVALID_SIGNATURE');
  const row = await deps.db.selectFrom('nonces').selectAll().where('nonce', '=', input.nonce).executeTakeFirst();
  if (!row || row.used_at || row.expires_at.getTime() <= Date.now()) throw refused();
  if (row.wallet_address !== input.wallet_address) throw badSig();
  const pub = decodeBase58(input.wallet_address);
  const sig = decodeBase58(input.signature_base58);
  if (!pub || pub.length !== 32 || !sig || sig.length !== 64) throw badSig();
  const message = new TextEncoder().encode(messageFor(deps.config, row));
  if (!nacl.sign.detached.verify(message, sig, pub)) throw badSig();

  const consumed = await deps.db
    .updateTable('nonces')
    .set({ used_at: sql`now()` })
    .where('nonce', '=', input.nonce)
    .where('used_at', 'is', null)
    .where('expires_at', '>', sql<Date>`now()`)
    .returning('nonce')
    .executeTakeFirst();
  if (!consumed) throw refused();

  const user = await deps.db
    .insertInto('users')
    .values({ wallet_address: input.wallet_address, last_login_at: sql`now()` })
    .onConflict((c) => c.column('wallet_address').doUpdateSet({ last_login_at: sql`now()` }))
    .returning('id')
    .executeTakeFirstOrThrow();

  const now = Math.floor(Date.now() / 1000);
  const exp = now + deps.config.TOKEN_TTL_SECONDS;
  const token = await new SignJWT({ wallet: input.wallet_address })
    .setProtectedHeader({ alg: 'EdDSA', kid: deps.key.kid, typ: 'at+jwt' })
    .setIssuer(deps.config.JWT_ISSUER)
    .setAudience(deps.config.JWT_AUDIENCE)
    .setSubject(user.id)
    .setIssuedAt(now)
    .setExpirationTime(exp)
    .setJti(randomUUID())
    .sign(deps.key.privateKey);
  return { token, wallet_address: input.wallet_address, user_id: user.id, expires_at: new Date(exp * 1000).toISOString() };
}

/**
 * Expired nonces, used or not, are deleted (every NONCE_PURGE_INTERVAL_SECONDS): they can open nothing, and a flood of
 * nonce requests must not leave rows behind for long. Logins are recorded by the users table and the logs.
 */
export async function pruneNonces(db: Kysely<AuthDB>): Promise<number> {
  const r = await db.deleteFrom('nonces').where('expires_at', '<', sql<Date>`now()`).executeTakeFirst();
  return Number(r.numDeletedRows);
}
