import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AppError, AssertionSigner, AssertionVerifier, encode, rawPublicKey, seal, SealOpener, SealOpenError, x25519PublicKey } from '../src/index.ts';

const pem = (k: ReturnType<typeof generateKeyPairSync>['privateKey']) => k.export({ type: 'pkcs8', format: 'pem' }).toString();
const gateway = generateKeyPairSync('ed25519');
const signer = new AssertionSigner(pem(gateway.privateKey));
const publicKey = rawPublicKey(gateway.publicKey);
const subject = 'keyvault.v1.keys.list';
const body = encode({ user_id: 'u-1', instance_id: 'i-1' });

const refusal = (fn: () => unknown): { code: string; status: number; message: string } => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    return err as AppError;
  }
  throw new Error('accepted');
};

describe('caller assertions', () => {
  it('verifies the gateway’s assertion and gives its user id, once', () => {
    const verifier = new AssertionVerifier([publicKey]);
    const token = signer.sign('u-1', subject, body);
    expect(verifier.verify(token, subject, body).sub).toBe('u-1');
    expect(refusal(() => verifier.verify(token, subject, body))).toMatchObject({
      code: 'ASSERTION_INVALID',
      status: 401,
      message: expect.stringMatching(/replay/),
    });
  });

  it('refuses a missing, forged, expired, moved or altered assertion', () => {
    const verifier = new AssertionVerifier([publicKey]);
    expect(refusal(() => verifier.verify(undefined, subject, body))).toMatchObject({ code: 'ASSERTION_INVALID', status: 401 });
    const attacker = new AssertionSigner(pem(generateKeyPairSync('ed25519').privateKey));
    expect(refusal(() => verifier.verify(attacker.sign('u-1', subject, body), subject, body)).code).toBe('ASSERTION_INVALID');
    const old = new AssertionSigner(pem(gateway.privateKey), { now: () => Date.now() - 60_000 });
    expect(refusal(() => verifier.verify(old.sign('u-1', subject, body), subject, body)).message).toMatch(/expired/);
    expect(refusal(() => verifier.verify(signer.sign('u-1', subject, body), 'keyvault.v1.keys.delete', body))).toMatchObject({
      code: 'ASSERTION_MISMATCH',
      status: 403,
    });
    expect(refusal(() => verifier.verify(signer.sign('u-1', subject, body), subject, encode({ user_id: 'u-2', instance_id: 'i-1' }))).code).toBe(
      'ASSERTION_MISMATCH',
    );
    // A signature moved onto other claims.
    const [, part, sig] = signer.sign('u-1', subject, body).split('.');
    const claims = JSON.parse(Buffer.from(part!, 'base64url').toString());
    const tampered = `v1.${Buffer.from(JSON.stringify({ ...claims, sub: 'u-2' })).toString('base64url')}.${sig}`;
    expect(refusal(() => verifier.verify(tampered, subject, body)).message).toMatch(/bad signature/);
  });

  it('reuses a read’s assertion for the same subject and body, which the backend accepts again; a write’s only once', () => {
    const verifier = new AssertionVerifier([publicKey]);
    const read = signer.sign('u-1', subject, body, true);
    expect(signer.sign('u-1', subject, body, true)).toBe(read);
    expect(signer.sign('u-1', subject, encode({ user_id: 'u-1', instance_id: 'i-2' }), true)).not.toBe(read);
    expect(verifier.verify(read, subject, body, true).sub).toBe('u-1');
    expect(verifier.verify(read, subject, body, true).sub).toBe('u-1');
    expect(refusal(() => verifier.verify(read, 'keyvault.v1.keys.delete', body, true)).code).toBe('ASSERTION_MISMATCH');
    const write = signer.sign('u-1', subject, body);
    expect(signer.sign('u-1', subject, body)).not.toBe(write);
    verifier.verify(write, subject, body);
    expect(refusal(() => verifier.verify(write, subject, body)).message).toMatch(/replay/);
  });

  it('accepts either key during a rotation', () => {
    const next = generateKeyPairSync('ed25519');
    const verifier = new AssertionVerifier([rawPublicKey(next.publicKey), publicKey]);
    expect(verifier.verify(signer.sign('u-1', subject, body), subject, body).sub).toBe('u-1');
    expect(verifier.verify(new AssertionSigner(pem(next.privateKey)).sign('u-1', subject, body), subject, body).sub).toBe('u-1');
  });
});

describe('sealed boxes for keyvault', () => {
  const keyvault = generateKeyPairSync('x25519');
  const opener = new SealOpener(pem(keyvault.privateKey));
  const recipient = x25519PublicKey(opener.publicKey);

  it('opens only with keyvault’s private key and only for the context it was sealed for', () => {
    const box = seal('sk-live-secret', recipient, 'ctx-a');
    expect(box).not.toContain('sk-live');
    expect(opener.open(box, 'ctx-a')).toBe('sk-live-secret');
    expect(() => opener.open(box, 'ctx-b')).toThrow(SealOpenError);
    const other = new SealOpener(pem(generateKeyPairSync('x25519').privateKey));
    expect(() => other.open(box, 'ctx-a')).toThrow(SealOpenError);
    expect(() => opener.open('not a box', 'ctx-a')).toThrow(SealOpenError);
    expect(seal('sk-live-secret', recipient, 'ctx-a')).not.toBe(box); // a fresh ephemeral key each time
  });
});
