import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { aadFor, decodeInstanceKey, KeyOpenError, openKey, parseSealed } from '../src/crypto.mjs';
import { flipFirstBit, seal, tamper } from './helpers.ts';

const key = randomBytes(32);
const instanceKey = key.toString('base64');
const instanceId = '0b6f3a52-6f0e-4f55-9a6e-3c1f1e2d9a10';

describe('openKey', () => {
  it('round-trips a value sealed under the AAD rule', () => {
    const sealed = seal(key, instanceId, 'OPENAI_API_KEY', 'sk-test-1234567890');
    expect(openKey({ instanceKey, instanceId, keyName: 'OPENAI_API_KEY', sealed })).toBe('sk-test-1234567890');
  });

  it('round-trips unicode, empty and long values', () => {
    for (const value of ['päßwörd ✓ 鍵', '', 'x'.repeat(64 * 1024)]) {
      const sealed = seal(key, instanceId, 'K', value);
      expect(openKey({ instanceKey, instanceId, keyName: 'K', sealed })).toBe(value);
    }
  });

  it('accepts a parsed object and a raw 32-byte key', () => {
    const sealed = JSON.parse(seal(key, instanceId, 'K', 'v')) as { encrypted: string; iv: string; authTag: string };
    expect(openKey({ instanceKey: key, instanceId, keyName: 'K', sealed })).toBe('v');
    // the caller's key buffer is left intact
    expect(key.equals(Buffer.from(instanceKey, 'base64'))).toBe(true);
  });

  it('binds the ciphertext to the instance id', () => {
    const sealed = seal(key, instanceId, 'K', 'v');
    expect(() => openKey({ instanceKey, instanceId: `${instanceId}x`, keyName: 'K', sealed })).toThrow(KeyOpenError);
  });

  it('binds the ciphertext to the key name', () => {
    const sealed = seal(key, instanceId, 'K', 'v');
    expect(() => openKey({ instanceKey, instanceId, keyName: 'OTHER', sealed })).toThrow(KeyOpenError);
    expect(() => openKey({ instanceKey, instanceId, keyName: 'k', sealed })).toThrow(KeyOpenError);
  });

  it('fails with another instance key', () => {
    const sealed = seal(key, instanceId, 'K', 'v');
    expect(() => openKey({ instanceKey: randomBytes(32).toString('base64'), instanceId, keyName: 'K', sealed })).toThrow(/authentication failed/);
  });

  it('detects a flipped bit in ciphertext, iv or tag', () => {
    const sealed = seal(key, instanceId, 'K', 'some value');
    for (const field of ['encrypted', 'iv', 'authTag'] as const) {
      expect(() => openKey({ instanceKey, instanceId, keyName: 'K', sealed: tamper(sealed, field, flipFirstBit) })).toThrow(KeyOpenError);
    }
  });

  it('rejects a truncated (short) auth tag', () => {
    const sealed = seal(key, instanceId, 'K', 'v');
    for (const len of [0, 4, 8, 12, 15]) {
      const short = tamper(sealed, 'authTag', (h) => h.slice(0, len * 2));
      expect(() => openKey({ instanceKey, instanceId, keyName: 'K', sealed: short })).toThrow(/authTag must be 16 bytes/);
    }
  });

  it('rejects malformed sealed values', () => {
    const sealed = seal(key, instanceId, 'K', 'v');
    const bad = [
      'not json',
      '[]',
      'null',
      JSON.stringify({}),
      tamper(sealed, 'iv', (h) => h.slice(0, 16)),
      tamper(sealed, 'encrypted', (h) => `${h}z`),
      tamper(sealed, 'encrypted', (h) => h.slice(1)),
    ];
    for (const s of bad) {
      expect(() => openKey({ instanceKey, instanceId, keyName: 'K', sealed: s })).toThrow(KeyOpenError);
    }
  });

  it('rejects instance keys that are not 32 bytes of base64', () => {
    const sealed = seal(key, instanceId, 'K', 'v');
    for (const bad of ['', 'not base64!', randomBytes(16).toString('base64'), randomBytes(33).toString('base64')]) {
      expect(() => openKey({ instanceKey: bad, instanceId, keyName: 'K', sealed })).toThrow(KeyOpenError);
    }
  });

  it('never puts key material in error messages', () => {
    const sealed = seal(key, instanceId, 'K', 'plaintext-canary');
    try {
      openKey({ instanceKey, instanceId: 'other', keyName: 'K', sealed });
      expect.unreachable();
    } catch (err) {
      const msg = String((err as Error).message);
      expect(msg).not.toContain(instanceKey);
      expect(msg).not.toContain(key.toString('hex'));
      expect(msg).not.toContain('plaintext-canary');
    }
  });

  it('refuses plaintext with a NUL byte (unusable as an environment value)', () => {
    const sealed = seal(key, instanceId, 'K', 'a\0b');
    expect(() => openKey({ instanceKey, instanceId, keyName: 'K', sealed })).toThrow(/NUL/);
  });
});

describe('helpers', () => {
  it('aadFor is the UTF-8 of agenthost:v1:<instance>:<name>', () => {
    expect(aadFor('i-1', 'K_1').toString('utf8')).toBe('agenthost:v1:i-1:K_1');
  });

  it('decodeInstanceKey returns 32 bytes', () => {
    expect(decodeInstanceKey(instanceKey).equals(key)).toBe(true);
  });

  it('parseSealed keeps the informational kid', () => {
    expect(parseSealed(seal(key, instanceId, 'K', 'v', 'mk-7')).kid).toBe('mk-7');
  });
});
