import { readFileSync } from 'node:fs';
import { exportJWK, importPKCS8, importSPKI, type CryptoKey, type JWK } from 'jose';
import { createHash, createPrivateKey, createPublicKey } from 'node:crypto';

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
 * The current signing key (from the configured PEM, or the file only auth can read) and every public key
 * that still verifies tokens. The private key is never stored in the database.
 */
export async function loadKeys(opts: { configuredPem: string; pemFile: string; previousJwks: string }) {
  const pem = (opts.configuredPem.trim() || readFileSync(opts.pemFile, 'utf8')).trim();
  const current = await fromPem(pem);
  const previous = (JSON.parse(opts.previousJwks) as PublicJwk[]).filter((k) => k.kid !== current.jwk.kid);
  return { signing: current.signing, jwks: [current.jwk, ...previous] };
}
