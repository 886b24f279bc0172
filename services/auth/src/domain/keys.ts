import { createHash, generateKeyPairSync } from 'node:crypto';
import { exportJWK, importPKCS8, importSPKI, type CryptoKey, type JWK } from 'jose';
import type { Kysely } from 'kysely';
import { createPublicKey, createPrivateKey } from 'node:crypto';
import type { Logger } from '@agenthost/shared';
import type { AuthDB } from '../db/schema.ts';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
}

export interface PublicJwk extends JWK {
  kid: string;
}

/** kid = RFC 7638-style thumbprint prefix of the public key: stable, and different for every key. */
function kidOf(publicPem: string): string {
  return createHash('sha256').update(publicPem).digest('base64url').slice(0, 16);
}

async function fromPem(privatePem: string): Promise<{ signing: SigningKey; jwk: PublicJwk }> {
  const publicPem = createPublicKey(createPrivateKey(privatePem)).export({ type: 'spki', format: 'pem' }).toString();
  const kid = kidOf(publicPem);
  const jwk = { ...(await exportJWK(await importSPKI(publicPem, 'EdDSA'))), kid, alg: 'EdDSA', use: 'sig' } as PublicJwk;
  return { signing: { kid, privateKey: await importPKCS8(privatePem, 'EdDSA') }, jwk };
}

/**
 * The current signing key and every public key that still verifies tokens. A configured key is used
 * as is; without one, a development key is generated once and kept in the auth schema, so all auth
 * replicas and restarts share it.
 */
export async function loadKeys(opts: { db: Kysely<AuthDB>; configuredPem: string; previousJwks: string; log: Logger }) {
  let pem = opts.configuredPem.trim();
  if (!pem) {
    opts.log.warn('AUTH_JWT_PRIVATE_KEY is not set: using the generated development signing key');
    const fresh = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const freshKid = kidOf(createPublicKey(fresh).export({ type: 'spki', format: 'pem' }).toString());
    await opts.db.insertInto('signing_keys').values({ kid: freshKid, private_pem: fresh }).onConflict((c) => c.doNothing()).execute();
    const row = await opts.db.selectFrom('signing_keys').select('private_pem').orderBy('created_at').limit(1).executeTakeFirstOrThrow();
    pem = row.private_pem;
  }
  const current = await fromPem(pem);
  const previous = (JSON.parse(opts.previousJwks) as PublicJwk[]).filter((k) => k.kid !== current.jwk.kid);
  return { signing: current.signing, jwks: [current.jwk, ...previous] };
}
