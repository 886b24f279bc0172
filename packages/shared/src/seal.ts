// Sealed boxes for keyvault: the gateway seals a provider key to keyvault's X25519 public key before it
// goes on the bus, so a subscriber to `>` (or a log of the bus) never sees plaintext. Only keyvault,
// which holds the private key, opens it.
//
// seal = base64url(0x01 | ephemeral X25519 public key (32) | IV (12) | GCM tag (16) | ciphertext)
// key  = HKDF-SHA256(X25519(ephemeral, recipient), salt = ephemeral pub | recipient pub, info = "agenthost seal v1")
// AAD  = the context the caller names (subject and instance id), so a box opens only where it was meant to.
import {
  createCipheriv,
  createDecipheriv,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import { rawPublicKey } from './nats/assertion.ts';

const VERSION = 1;
const INFO = 'agenthost seal v1';

export class SealOpenError extends Error {
  constructor() {
    super('the sealed value cannot be opened');
    this.name = 'SealOpenError';
  }
}

/** X25519 public key from its base64 raw form (throws on anything else). */
export function x25519PublicKey(b64: string): KeyObject {
  const raw = Buffer.from(b64.trim(), 'base64');
  if (raw.length !== 32) throw new Error('must be base64 of a 32-byte X25519 public key');
  return createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: raw.toString('base64url') }, format: 'jwk' });
}

function boxKey(shared: Buffer, ephemeralRaw: Buffer, recipientRaw: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.concat([ephemeralRaw, recipientRaw]), INFO, 32));
}

/** Seal text for the holder of the private key of `recipient`, bound to `context`. */
export function seal(text: string, recipient: KeyObject, context: string): string {
  const eph = generateKeyPairSync('x25519');
  const ephRaw = Buffer.from(rawPublicKey(eph.publicKey), 'base64');
  const key = boxKey(diffieHellman({ privateKey: eph.privateKey, publicKey: recipient }), ephRaw, Buffer.from(rawPublicKey(recipient), 'base64'));
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(context, 'utf8'));
  const ct = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  key.fill(0);
  return Buffer.concat([Buffer.from([VERSION]), ephRaw, iv, cipher.getAuthTag(), ct]).toString('base64url');
}

/** keyvault's side: the private key (PKCS#8 PEM) that opens what was sealed to its public key. */
export class SealOpener {
  private readonly key: KeyObject;
  private readonly publicRaw: Buffer;

  constructor(pem: string) {
    this.key = createPrivateKey(pem);
    if (this.key.asymmetricKeyType !== 'x25519') throw new Error('the seal key must be an X25519 private key');
    this.publicRaw = Buffer.from(rawPublicKey(createPublicKey(this.key)), 'base64');
  }

  /** base64 of the raw public key: what the gateway is configured with. */
  get publicKey(): string {
    return this.publicRaw.toString('base64');
  }

  /** The text, or SealOpenError for anything that is not a box sealed to this key for this context. */
  open(box: string, context: string): string {
    const b = Buffer.from(box, 'base64url');
    if (b.length < 1 + 32 + 12 + 16 || b[0] !== VERSION) throw new SealOpenError();
    const ephRaw = b.subarray(1, 33);
    try {
      const eph = createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: ephRaw.toString('base64url') }, format: 'jwk' });
      const key = boxKey(diffieHellman({ privateKey: this.key, publicKey: eph }), ephRaw, this.publicRaw);
      const decipher = createDecipheriv('aes-256-gcm', key, b.subarray(33, 45)).setAAD(Buffer.from(context, 'utf8'));
      decipher.setAuthTag(b.subarray(45, 61));
      const text = Buffer.concat([decipher.update(b.subarray(61)), decipher.final()]).toString('utf8');
      key.fill(0);
      return text;
    } catch {
      throw new SealOpenError();
    }
  }
}
