import type { Kysely } from 'kysely';
import { contracts, type ServiceDefinition } from '@agenthost/shared';
import type { AuthDB } from '../db/schema.ts';

type NatsConnection = Parameters<ServiceDefinition<never, unknown>['build']>[0]['nc'];

/**
 * Stores the revocation (the shared record a gateway loads at start), then broadcasts it so every
 * running gateway refuses the token at once. Revoking twice is harmless.
 */
export async function revokeToken(db: Kysely<AuthDB>, nc: NatsConnection, input: { jti: string; exp: number; user_id: string }): Promise<{ success: boolean }> {
  await db
    .insertInto('revoked_tokens')
    .values({ jti: input.jti, user_id: input.user_id, expires_at: new Date(input.exp * 1000) })
    .onConflict((oc) => oc.column('jti').doNothing())
    .execute();
  nc.publish(contracts.auth.TOKEN_REVOKED_SUBJECT, JSON.stringify({ jti: input.jti, exp: input.exp }));
  await nc.flush();
  return { success: true };
}

export async function revokedTokens(db: Kysely<AuthDB>): Promise<{ tokens: { jti: string; exp: number }[] }> {
  const rows = await db.selectFrom('revoked_tokens').select(['jti', 'expires_at']).where('expires_at', '>', new Date()).execute();
  return { tokens: rows.map((r) => ({ jti: r.jti, exp: Math.floor(r.expires_at.getTime() / 1000) })) };
}

/** Entries of expired tokens are useless: the signature check refuses those tokens already. */
export async function pruneRevoked(db: Kysely<AuthDB>): Promise<void> {
  await db.deleteFrom('revoked_tokens').where('expires_at', '<=', new Date()).execute();
}
