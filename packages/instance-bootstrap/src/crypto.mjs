// Instance-side decryption of stored keys. Zero dependencies: this file is copied
// into agent images next to bootstrap.mjs.
//
// Format of a sealed key (the string the gateway returns per key name):
//   {"encrypted":"<hex>","iv":"<hex, 12 bytes>","authTag":"<hex, 16 bytes>","kid":"<master key id>"}
// Cipher: AES-256-GCM with the per-instance key (32 bytes, given base64-encoded).
// AAD: UTF-8 bytes of `agenthost:v1:${instanceId}:${keyName}`, so a ciphertext only opens
// for the instance and key name it was sealed for.
import { createDecipheriv } from 'node:crypto';

export const AAD_VERSION = 'agenthost:v1';
export const KEY_BYTES = 32;
export const IV_BYTES = 12;
export const TAG_BYTES = 16;
/** Names a decrypted key may carry: a portable environment variable name. */
export const KEY_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,99}$/;

const HEX_RE = /^(?:[0-9a-fA-F]{2})*$/;
const B64_RE = /^[A-Za-z0-9+/_-]*={0,2}$/;

export class KeyOpenError extends Error {
  constructor(message) {
    super(message);
    this.name = 'KeyOpenError';
  }
}

/** The additional authenticated data binding a ciphertext to an instance and key name. */
export function aadFor(instanceId, keyName) {
  return Buffer.from(`${AAD_VERSION}:${instanceId}:${keyName}`, 'utf8');
}

/** Decodes the base64 instance key; throws unless it is exactly 32 bytes. */
export function decodeInstanceKey(value) {
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) {
    if (value.length !== KEY_BYTES) throw new KeyOpenError(`instance key must be ${KEY_BYTES} bytes`);
    return Buffer.from(value);
  }
  if (typeof value !== 'string') throw new KeyOpenError('instance key missing');
  const text = value.trim();
  if (text === '' || !B64_RE.test(text)) throw new KeyOpenError('instance key is not base64');
  const key = Buffer.from(text, 'base64');
  if (key.length !== KEY_BYTES) throw new KeyOpenError(`instance key must be ${KEY_BYTES} bytes`);
  return key;
}

function hexField(obj, field, expectedBytes) {
  const value = obj[field];
  if (typeof value !== 'string' || !HEX_RE.test(value)) {
    throw new KeyOpenError(`sealed value: ${field} is not hex`);
  }
  const bytes = Buffer.from(value, 'hex');
  if (expectedBytes !== undefined && bytes.length !== expectedBytes) {
    throw new KeyOpenError(`sealed value: ${field} must be ${expectedBytes} bytes`);
  }
  return bytes;
}

/** Parses a sealed value (the JSON string, or an already-parsed object). */
export function parseSealed(sealed) {
  let obj = sealed;
  if (typeof sealed === 'string') {
    try {
      obj = JSON.parse(sealed);
    } catch {
      throw new KeyOpenError('sealed value is not JSON');
    }
  }
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    throw new KeyOpenError('sealed value is not an object');
  }
  return {
    encrypted: hexField(obj, 'encrypted'),
    iv: hexField(obj, 'iv', IV_BYTES),
    authTag: hexField(obj, 'authTag', TAG_BYTES),
    kid: typeof obj.kid === 'string' ? obj.kid : undefined,
  };
}

/**
 * Opens one sealed key and returns its plaintext (UTF-8).
 * @param {{ instanceKey: string | Uint8Array, instanceId: string, keyName: string, sealed: string | object }} args
 * instanceKey: base64 string or 32 raw bytes.
 * Throws KeyOpenError on any malformed input or authentication failure; the message never
 * contains key material.
 */
export function openKey({ instanceKey, instanceId, keyName, sealed }) {
  if (typeof instanceId !== 'string' || instanceId === '') throw new KeyOpenError('instance id missing');
  if (typeof keyName !== 'string' || keyName === '') throw new KeyOpenError('key name missing');
  const key = decodeInstanceKey(instanceKey);
  const { encrypted, iv, authTag } = parseSealed(sealed);
  let plain;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(aadFor(instanceId, keyName));
    decipher.setAuthTag(authTag);
    plain = Buffer.concat([decipher.update(encrypted), decipher.final()]);
  } catch {
    throw new KeyOpenError('authentication failed (wrong key, instance, key name, or tampered data)');
  } finally {
    key.fill(0);
  }
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(plain);
  } catch {
    throw new KeyOpenError('plaintext is not UTF-8');
  } finally {
    plain.fill(0);
  }
  if (text.includes('\0')) throw new KeyOpenError('plaintext contains a NUL byte (not usable as env value)');
  return text;
}
