import { createCipheriv, randomBytes } from 'node:crypto';

/** Seals a value the way the keyvault does: AES-256-GCM, AAD `agenthost:v1:<instance>:<name>`. */
export function seal(key: Buffer, instanceId: string, keyName: string, plaintext: string, kid = 'mk-test'): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(`agenthost:v1:${instanceId}:${keyName}`, 'utf8'));
  const encrypted = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return JSON.stringify({
    encrypted: encrypted.toString('hex'),
    iv: iv.toString('hex'),
    authTag: cipher.getAuthTag().toString('hex'),
    kid,
  });
}

/** Returns the sealed JSON with one field transformed. */
export function tamper(sealed: string, field: 'encrypted' | 'iv' | 'authTag', f: (hex: string) => string): string {
  const obj = JSON.parse(sealed) as Record<string, string>;
  obj[field] = f(obj[field] ?? '');
  return JSON.stringify(obj);
}

/** Flips the lowest bit of the first byte of a hex string. */
export function flipFirstBit(hex: string): string {
  const b = Buffer.from(hex, 'hex');
  b[0] = (b[0] ?? 0) ^ 1;
  return b.toString('hex');
}
