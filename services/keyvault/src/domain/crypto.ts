// All of keyvault's cryptography, in one place.
//
// Master keys (a keyring: the current one seals, older ones still open) never leave keyvault. Each
// instance gets its own key, derived from a master key:
//   instance key = HKDF-SHA256(ikm = master key, salt = UTF-8 instance id, info = "agenthost instance key v1", 32 bytes)
// Every stored value is sealed with its instance's key: AES-256-GCM, a fresh random 12-byte IV per
// encryption, a 16-byte tag, and AAD = UTF-8 of `agenthost:v1:<instance id>:<key name>`, so a
// ciphertext opens only for the instance and key name it was sealed for. The sealed form is the JSON
//   {"encrypted":hex,"iv":hex,"authTag":hex,"kid":"<id of the master key the instance key came from>"}
// which is what the database holds and what the instance receives (packages/instance-bootstrap opens it).
//
// Instance secrets: 256 random bits; only their SHA-256 is stored (a fast hash is enough for a
// full-entropy secret) and compared in constant time.
import { countOperation } from '../metrics.ts';
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const AAD_VERSION = 'agenthost:v1';
const HKDF_INFO = 'agenthost instance key v1';
/** Master key ids: short, printable, safe in JSON and logs. */
export const KID_RE = /^[A-Za-z0-9._-]{1,32}$/;

export class SealError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SealError';
  }
}

export interface Sealed {
  encrypted: string;
  iv: string;
  authTag: string;
  kid: string;
}

const B64_RE = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * Decode a base64 master key, or say what is wrong with it (never echoing it). Standard base64 only
 * (surrounding whitespace ignored), exactly 32 bytes.
 */
export function decodeMasterKey(text: string): { key: Buffer } | { problem: string } {
  const t = text.trim();
  if (t === '') return { problem: 'is empty; set it to base64 of 32 random bytes (e.g. `openssl rand -base64 32`)' };
  if (!B64_RE.test(t) || t.length % 4 !== 0) return { problem: 'is not valid base64' };
  const key = Buffer.from(t, 'base64');
  if (key.toString('base64') !== t) return { problem: 'is not valid base64' };
  if (key.length !== KEY_BYTES) return { problem: `must decode to ${KEY_BYTES} bytes, got ${key.length}` };
  return { key };
}

/** The additional authenticated data that binds a ciphertext to its instance and key name. */
const aadFor = (instanceId: string, keyName: string): Buffer => Buffer.from(`${AAD_VERSION}:${instanceId}:${keyName}`, 'utf8');

/**
 * HKDF-SHA256 of the master key with the instance id as salt: the key values are stored under. With an
 * epoch (random per credentials issue), the key the instance is given for that issue: ciphertexts are
 * re-sealed to it when the instance fetches them, so a leaked instance key dies with the next restart.
 */
export function deriveInstanceKey(masterKey: Buffer, instanceId: string, epoch?: Buffer | null): Buffer {
  if (masterKey.length !== KEY_BYTES) throw new SealError('master key must be 32 bytes');
  const info = epoch ? Buffer.concat([Buffer.from(`${HKDF_INFO}:epoch:`, 'utf8'), epoch]) : Buffer.from(HKDF_INFO, 'utf8');
  return Buffer.from(hkdfSync('sha256', masterKey, Buffer.from(instanceId, 'utf8'), info, KEY_BYTES));
}

/** Encrypt one value for one instance and key name. kid records which master key the instance key came from. */
export function seal(instanceKey: Buffer, instanceId: string, keyName: string, plaintext: string, kid: string): Sealed {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', instanceKey, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aadFor(instanceId, keyName));
  const plain = Buffer.from(plaintext, 'utf8');
  const encrypted = Buffer.concat([cipher.update(plain), cipher.final()]);
  plain.fill(0);
  return { encrypted: encrypted.toString('hex'), iv: iv.toString('hex'), authTag: cipher.getAuthTag().toString('hex'), kid };
}

const HEX_RE = /^(?:[0-9a-f]{2})*$/;

/** Parse the stored/sent JSON form, checking every field's encoding and length. */
export function parseSealed(json: string): Sealed {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    throw new SealError('sealed value is not JSON');
  }
  const o = v as Record<string, unknown> | null;
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw new SealError('sealed value is not an object');
  const hex = (field: string, bytes?: number): string => {
    const s = o[field];
    if (typeof s !== 'string' || !HEX_RE.test(s)) throw new SealError(`sealed value: ${field} is not hex`);
    if (bytes !== undefined && s.length !== bytes * 2) throw new SealError(`sealed value: ${field} must be ${bytes} bytes`);
    return s;
  };
  const kid = o.kid;
  if (typeof kid !== 'string' || !KID_RE.test(kid)) throw new SealError('sealed value: kid is missing');
  return { encrypted: hex('encrypted'), iv: hex('iv', IV_BYTES), authTag: hex('authTag', TAG_BYTES), kid };
}

export const serializeSealed = (s: Sealed): string => JSON.stringify({ encrypted: s.encrypted, iv: s.iv, authTag: s.authTag, kid: s.kid });

/** Decrypt, or throw SealError when anything (key, instance, name, IV, tag, ciphertext) does not match. */
export function open(instanceKey: Buffer, instanceId: string, keyName: string, sealed: Sealed): string {
  const tag = Buffer.from(sealed.authTag, 'hex');
  const iv = Buffer.from(sealed.iv, 'hex');
  if (tag.length !== TAG_BYTES) throw new SealError('auth tag must be 16 bytes');
  if (iv.length !== IV_BYTES) throw new SealError('iv must be 12 bytes');
  let plain: Buffer;
  try {
    const decipher = createDecipheriv('aes-256-gcm', instanceKey, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(aadFor(instanceId, keyName));
    decipher.setAuthTag(tag);
    plain = Buffer.concat([decipher.update(Buffer.from(sealed.encrypted, 'hex')), decipher.final()]);
  } catch {
    throw new SealError('authentication failed');
  }
  const text = plain.toString('utf8');
  plain.fill(0);
  return text;
}

/** Length of the sealed value's plaintext in bytes (GCM adds no padding), without decrypting. */
export const plaintextBytes = (s: Sealed): number => s.encrypted.length / 2;

/** The master keys keyvault knows: the current one seals, every one opens what it sealed. */
export class Keyring {
  readonly currentId: string;
  private readonly keys: Map<string, Buffer>;

  constructor(currentId: string, keys: Map<string, Buffer>) {
    if (!keys.has(currentId)) throw new SealError('the current master key is not in the keyring');
    for (const [kid, k] of keys) {
      if (!KID_RE.test(kid)) throw new SealError('invalid master key id');
      if (k.length !== KEY_BYTES) throw new SealError('master keys must be 32 bytes');
    }
    this.currentId = currentId;
    this.keys = new Map(keys);
  }

  has(kid: string): boolean {
    return this.keys.has(kid);
  }

  ids(): string[] {
    return [...this.keys.keys()];
  }

  /** The instance key derived from master key kid (default: the current one), for an issue's epoch when given. */
  instanceKey(instanceId: string, kid: string = this.currentId, epoch?: Buffer | null): Buffer {
    const master = this.keys.get(kid);
    if (!master) throw new SealError(`unknown master key id ${kid}`);
    return deriveInstanceKey(master, instanceId, epoch);
  }

  /** A stored value sealed for the instance's current issue (epoch) under master key kid; the plaintext only lives in this call. */
  sealForIssue(instanceId: string, keyName: string, stored: Sealed, kid: string, epoch: Buffer): Sealed {
    const k = this.instanceKey(instanceId, kid, epoch);
    try {
      return seal(k, instanceId, keyName, this.open(instanceId, keyName, stored), kid);
    } finally {
      k.fill(0);
    }
  }

  /** Seal under the current master key (or the one named). */
  seal(instanceId: string, keyName: string, plaintext: string, kid: string = this.currentId): Sealed {
    const k = this.instanceKey(instanceId, kid);
    try {
      return countOperation('seal', () => seal(k, instanceId, keyName, plaintext, kid));
    } finally {
      k.fill(0);
    }
  }

  /** Open with the master key the ciphertext records. */
  open(instanceId: string, keyName: string, sealed: Sealed): string {
    const k = this.instanceKey(instanceId, sealed.kid);
    try {
      return countOperation('open', () => open(k, instanceId, keyName, sealed));
    } finally {
      k.fill(0);
    }
  }

  /** The same value sealed under another master key (the plaintext only lives in this call). */
  reseal(instanceId: string, keyName: string, sealed: Sealed, toKid: string = this.currentId): Sealed {
    if (sealed.kid === toKid) return sealed;
    return this.seal(instanceId, keyName, this.open(instanceId, keyName, sealed), toKid);
  }
}

/** A new instance secret: 256 bits from the CSPRNG, prefixed so it is recognisable if it ever leaks. */
export const newInstanceSecret = (): string => `ahis_${randomBytes(32).toString('base64url')}`;

export const hashSecret = (secret: string): Buffer => createHash('sha256').update(secret, 'utf8').digest();

/** Compare a presented secret with a stored hash in constant time (both sides are 32-byte digests). */
export function secretMatches(presented: string, storedHash: Buffer | null): boolean {
  const h = hashSecret(presented);
  // Without a stored hash, compare against a dummy so an unknown instance costs the same time.
  const ref = storedHash && storedHash.length === h.length ? storedHash : DUMMY_HASH;
  return timingSafeEqual(h, ref) && storedHash !== null;
}

const DUMMY_HASH = hashSecret(`dummy-${randomBytes(16).toString('hex')}`);
