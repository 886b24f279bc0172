import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { AssertionSigner, contracts, seal, x25519PublicKey } from '@agenthost/shared';
import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { testLogDir } from './paths.ts';

/**
 * Remember a secret a test used (token, signature, private key, key value) so that the scan after the
 * run (deploy/scan-logs.ts) can prove it never reached a log line. The file lives only in the test
 * log directory and is deleted by the scan.
 */
export function recordSecret(value: string): void {
  if (value.length < 8) return;
  const dir = path.join(testLogDir, 'secrets');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  appendFileSync(path.join(dir, `${process.pid}.txt`), `${value}\n`, { mode: 0o600 });
}

/** A fresh Ed25519 signing key for auth (PKCS#8 PEM), registered for the log scan. */
export function newSigningKeyPem(): string {
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  recordSecret(pem.split('\n')[1]!);
  return pem;
}

/**
 * The gateway's assertion key pair (Ed25519) and keyvault's seal key pair (X25519) of this test process: every
 * stack it starts uses them, so a test can sign what the gateway signs (testAsserter) or seal what it seals.
 */
export const busKeys = (() => {
  let keys: { assertionPem: string; assertionPublic: string; sealPem: string; sealPublic: string } | undefined;
  return () => {
    if (keys) return keys;
    const a = generateKeyPairSync('ed25519');
    const s = generateKeyPairSync('x25519');
    const raw = (k: KeyObject) => Buffer.from(k.export({ format: 'jwk' }).x!, 'base64url').toString('base64');
    const assertionPem = a.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const sealPem = s.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    recordSecret(assertionPem.split('\n')[1]!);
    recordSecret(sealPem.split('\n')[1]!);
    keys = { assertionPem, assertionPublic: raw(a.publicKey), sealPem, sealPublic: raw(s.publicKey) };
    return keys;
  };
})();

/** Signs as the gateway of this process's stacks (request(..., { asserter: testAsserter() })). */
export const testAsserter = (): AssertionSigner => new AssertionSigner(busKeys().assertionPem);

/** The sealed_keys of a keyvault.v1.keys.store call, sealed as the gateway seals them to this process's keyvault key. */
export const sealedKeys = (instanceId: string, keys: Record<string, string>): string =>
  seal(JSON.stringify(keys), x25519PublicKey(busKeys().sealPublic), contracts.keyvault.sealContext(contracts.keyvault.store.subject, instanceId));
