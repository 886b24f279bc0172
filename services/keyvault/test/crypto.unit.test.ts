import { randomBytes, webcrypto } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openKey } from '@agenthost/instance-bootstrap/crypto';
import { recordSecret } from '@agenthost/testkit';
import {
  decodeMasterKey,
  deriveInstanceKey,
  hashSecret,
  Keyring,
  newInstanceSecret,
  open,
  parseSealed,
  secretMatches,
  serializeSealed,
  type Sealed,
} from '../src/domain/crypto.ts';

const masterKey = (): Buffer => {
  const k = randomBytes(32);
  recordSecret(k.toString('base64'));
  return k;
};
const value = (label = 'sk'): string => {
  const v = `${label}-${randomBytes(24).toString('base64url')}`;
  recordSecret(v);
  return v;
};
const ring = (current: string, keys: Record<string, Buffer>) => new Keyring(current, new Map(Object.entries(keys)));
const flipHex = (hex: string, byte = 0): string => {
  const b = Buffer.from(hex, 'hex');
  b[byte] = b[byte]! ^ 0x01;
  return b.toString('hex');
};

describe('sealing a key for an instance', () => {
  const k1 = masterKey();
  const keyring = ring('k1', { k1 });

  it('opens for the same instance and key name, and the instance bootstrap opens it with the instance key alone', () => {
    const v = value();
    const sealed = keyring.seal('inst-a', 'OPENAI_API_KEY', v);
    expect(keyring.open('inst-a', 'OPENAI_API_KEY', sealed)).toBe(v);
    const instanceKey = keyring.instanceKey('inst-a').toString('base64');
    recordSecret(instanceKey);
    expect(openKey({ instanceKey, instanceId: 'inst-a', keyName: 'OPENAI_API_KEY', sealed: serializeSealed(sealed) })).toBe(v);
  });

  it('uses the spec format: hex encrypted/iv/authTag with a 12-byte IV, a 16-byte tag and the master key id', () => {
    const json = serializeSealed(keyring.seal('inst-a', 'K', value()));
    const o = JSON.parse(json) as Record<string, string>;
    expect(Object.keys(o).sort()).toEqual(['authTag', 'encrypted', 'iv', 'kid']);
    expect(o.iv).toMatch(/^[0-9a-f]{24}$/);
    expect(o.authTag).toMatch(/^[0-9a-f]{32}$/);
    expect(o.kid).toBe('k1');
    expect(parseSealed(json)).toEqual(o);
  });

  it('derives the instance key with HKDF-SHA256(master, salt = instance id, info = "agenthost instance key v1")', async () => {
    const ikm = await webcrypto.subtle.importKey('raw', k1, 'HKDF', false, ['deriveBits']);
    const bits = await webcrypto.subtle.deriveBits(
      { name: 'HKDF', hash: 'SHA-256', salt: new TextEncoder().encode('inst-a'), info: new TextEncoder().encode('agenthost instance key v1') },
      ikm,
      256,
    );
    expect(deriveInstanceKey(k1, 'inst-a').equals(Buffer.from(bits))).toBe(true);
    expect(deriveInstanceKey(k1, 'inst-a').equals(deriveInstanceKey(k1, 'inst-b'))).toBe(false);
    expect(deriveInstanceKey(k1, 'inst-a').equals(k1)).toBe(false);
  });

  it('fails to open when the ciphertext is moved to another instance’s row', () => {
    const sealed = keyring.seal('inst-a', 'OPENAI_API_KEY', value());
    expect(() => keyring.open('inst-b', 'OPENAI_API_KEY', sealed)).toThrow(/authentication failed/);
    // Even with the right instance key of the original instance, the AAD names the instance.
    expect(() => open(keyring.instanceKey('inst-a'), 'inst-b', 'OPENAI_API_KEY', sealed)).toThrow(/authentication failed/);
    const otherKey = keyring.instanceKey('inst-b').toString('base64');
    recordSecret(otherKey);
    expect(() => openKey({ instanceKey: otherKey, instanceId: 'inst-b', keyName: 'OPENAI_API_KEY', sealed: serializeSealed(sealed) })).toThrow();
  });

  it('fails to open under another key name', () => {
    const sealed = keyring.seal('inst-a', 'OPENAI_API_KEY', value());
    expect(() => keyring.open('inst-a', 'ANTHROPIC_API_KEY', sealed)).toThrow(/authentication failed/);
  });

  it('fails to open when any bit of ciphertext, IV or tag is flipped', () => {
    const sealed = keyring.seal('inst-a', 'K', value());
    for (const field of ['encrypted', 'iv', 'authTag'] as const) {
      for (const byte of [0, 5, 11]) {
        const tampered: Sealed = { ...sealed, [field]: flipHex(sealed[field], byte) };
        expect(() => keyring.open('inst-a', 'K', tampered)).toThrow();
      }
    }
  });

  it('fails to open with a short tag, and refuses to parse one', () => {
    const sealed = keyring.seal('inst-a', 'K', value());
    const short: Sealed = { ...sealed, authTag: sealed.authTag.slice(0, 24) };
    expect(() => keyring.open('inst-a', 'K', short)).toThrow();
    expect(() => parseSealed(serializeSealed(short))).toThrow(/authTag must be 16 bytes/);
    expect(() => parseSealed(serializeSealed({ ...sealed, authTag: '' }))).toThrow();
  });

  it('uses a fresh IV for every encryption, so equal values never give equal ciphertexts', () => {
    const v = value();
    const ivs = new Set<string>();
    const cts = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const s = keyring.seal('inst-a', 'K', v);
      ivs.add(s.iv);
      cts.add(s.encrypted);
    }
    expect(ivs.size).toBe(2000);
    expect(cts.size).toBe(2000);
  });
});

describe('master key rotation', () => {
  it('opens old and new ciphertexts after rotation, and re-sealing moves everything to the new key', () => {
    const k1 = masterKey();
    const k2 = masterKey();
    const before = ring('k1', { k1 });
    const oldValue = value('old');
    const oldSealed = before.seal('inst-a', 'OLD_KEY', oldValue);
    expect(oldSealed.kid).toBe('k1');

    const after = ring('k2', { k1, k2 });
    const newValue = value('new');
    const newSealed = after.seal('inst-a', 'NEW_KEY', newValue);
    expect(newSealed.kid).toBe('k2');
    expect(after.open('inst-a', 'OLD_KEY', oldSealed)).toBe(oldValue);
    expect(after.open('inst-a', 'NEW_KEY', newSealed)).toBe(newValue);

    const resealed = after.reseal('inst-a', 'OLD_KEY', oldSealed);
    expect(resealed.kid).toBe('k2');
    expect(resealed.iv).not.toBe(oldSealed.iv);
    // Once everything is re-sealed, the old key can be dropped.
    const only2 = ring('k2', { k2 });
    expect(only2.open('inst-a', 'OLD_KEY', resealed)).toBe(oldValue);
    expect(only2.open('inst-a', 'NEW_KEY', newSealed)).toBe(newValue);
    expect(() => only2.open('inst-a', 'OLD_KEY', oldSealed)).toThrow(/unknown master key id/);
  });

  it('re-seals for an instance still holding a key derived from the previous master key', () => {
    const k1 = masterKey();
    const k2 = masterKey();
    const keyring = ring('k2', { k1, k2 });
    const v = value();
    const forK1 = keyring.reseal('inst-a', 'K', keyring.seal('inst-a', 'K', v), 'k1');
    const k1InstanceKey = keyring.instanceKey('inst-a', 'k1').toString('base64');
    recordSecret(k1InstanceKey);
    expect(openKey({ instanceKey: k1InstanceKey, instanceId: 'inst-a', keyName: 'K', sealed: serializeSealed(forK1) })).toBe(v);
  });
});

describe('master key validation', () => {
  it('accepts exactly 32 bytes of standard base64 and says what is wrong otherwise, without echoing the key', () => {
    const good = randomBytes(32).toString('base64');
    recordSecret(good);
    expect('key' in decodeMasterKey(good)).toBe(true);
    expect('key' in decodeMasterKey(` ${good}\n`)).toBe(true);
    const problem = (s: string) => {
      const r = decodeMasterKey(s);
      return 'problem' in r ? r.problem : 'ok';
    };
    expect(problem('')).toMatch(/empty/);
    expect(problem('not base64 at all!')).toMatch(/not valid base64/);
    expect(problem(good.slice(0, -2))).toMatch(/not valid base64/);
    const short = randomBytes(31).toString('base64');
    expect(problem(short)).toBe('must decode to 32 bytes, got 31');
    expect(problem(randomBytes(33).toString('base64'))).toMatch(/got 33/);
    expect(problem(randomBytes(32).toString('base64url'))).toMatch(/not valid base64|32 bytes/);
  });
});

describe('instance secrets', () => {
  it('are 256-bit random, stored only as a hash, and compared against it', () => {
    const s = newInstanceSecret();
    recordSecret(s);
    expect(Buffer.from(s.replace(/^ahis_/, ''), 'base64url')).toHaveLength(32);
    expect(newInstanceSecret()).not.toBe(s);
    const h = hashSecret(s);
    expect(h.toString('hex')).not.toContain(Buffer.from(s).toString('hex'));
    expect(secretMatches(s, h)).toBe(true);
    expect(secretMatches(`${s}x`, h)).toBe(false);
    expect(secretMatches(s, null)).toBe(false);
    expect(secretMatches('', h)).toBe(false);
  });
});
