import { generateKeyPairSync } from 'node:crypto';
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
