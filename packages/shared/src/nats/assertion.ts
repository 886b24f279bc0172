// Caller assertions: how a backend knows that a request acting for a user came from the gateway.
//
// A NATS identity says which service may publish on a subject, not for whom. So for every request it
// forwards for a user, the gateway signs a short-lived statement with its own Ed25519 key:
//   header Agenthost-Assertion: v1.<base64url(JSON claims)>.<base64url(Ed25519 signature of the claims part)>
//   claims { kid, sub: user id, sbj: NATS subject, bh: base64url SHA-256 of the exact message body, iat, exp, jti }
// Backends hold only the gateway's public keys (pinned from configuration) and take the user id from a
// verified assertion alone: a bare user_id, a forged or expired assertion, one sent to another subject or
// with another body, or a write's seen before, is refused.
import { createHash, createPrivateKey, createPublicKey, hash, randomUUID, sign, verify, type KeyObject } from 'node:crypto';
import { AppError } from '../errors.ts';

export const ASSERTION_HEADER = 'Agenthost-Assertion';
/** Lifetime of an assertion: long enough for a request queued behind a slow one, short enough that a copy is soon worthless. */
export const ASSERTION_TTL_SECONDS = 30;
/** Clocks of two hosts may disagree this much. */
const CLOCK_SKEW_SECONDS = 5;

export interface AssertionClaims {
  kid: string;
  sub: string;
  sbj: string;
  bh: string;
  iat: number;
  exp: number;
  jti: string;
}

const b64url = (b: Uint8Array): string => Buffer.from(b).toString('base64url');
/**
 * One-shot hash: the gateway hashes every forwarded body and the backend every received one, and a createHash()
 * object per message is a native handle each young-generation collection has to finalise (tokens.ts says what that
 * cost the gateway's tail).
 */
export const bodyHash = (body: Uint8Array): string => hash('sha256', body, 'base64url');

/** A short id of a public key (the first 12 base64url characters of SHA-256 of its raw 32 bytes). */
export const keyIdOf = (raw: Buffer): string => createHash('sha256').update(raw).digest('base64url').slice(0, 12);

/** The raw 32 bytes of an Ed25519 or X25519 public key, base64: the form public keys are configured in. */
export const rawPublicKey = (key: KeyObject): string => Buffer.from(key.export({ format: 'jwk' }).x!, 'base64url').toString('base64');

/** Ed25519 public key from its base64 raw form (throws on anything else). */
export function ed25519PublicKey(b64: string): KeyObject {
  const raw = Buffer.from(b64.trim(), 'base64');
  if (raw.length !== 32) throw new Error('must be base64 of a 32-byte Ed25519 public key');
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

/** The gateway's side: one signature per forwarded write, one per user, subject and body every ~15 s for reads. */
export class AssertionSigner {
  private readonly key: KeyObject;
  readonly kid: string;
  private readonly now: () => number;
  /** Reads' assertions by subject and body hash, reused while they have more than half their life left. */
  private readonly recent = new Map<string, { token: string; until: number }>();

  /** pem: the gateway's Ed25519 private key (PKCS#8 PEM). */
  constructor(pem: string, opts: { now?: () => number } = {}) {
    this.key = createPrivateKey(pem);
    if (this.key.asymmetricKeyType !== 'ed25519') throw new Error('the assertion key must be an Ed25519 private key');
    this.kid = keyIdOf(Buffer.from(rawPublicKey(createPublicKey(this.key)), 'base64'));
    this.now = opts.now ?? Date.now;
  }

  /**
   * The assertion for one call. reusable (a read): the assertion made for the same subject and body within the
   * last half of its lifetime is returned again, so a user's repeated reads cost one signature per ~15 s.
   */
  sign(sub: string, subject: string, body: Uint8Array, reusable = false): string {
    const bh = bodyHash(body);
    const now = this.now();
    const key = reusable ? `${subject}\n${bh}` : '';
    if (reusable) {
      const hit = this.recent.get(key);
      if (hit && hit.until > now) return hit.token;
    }
    const iat = Math.floor(now / 1000);
    const claims: AssertionClaims = { kid: this.kid, sub, sbj: subject, bh, iat, exp: iat + ASSERTION_TTL_SECONDS, jti: randomUUID() };
    const part = b64url(Buffer.from(JSON.stringify(claims)));
    const token = `v1.${part}.${b64url(sign(null, Buffer.from(part), this.key))}`;
    if (reusable) {
      if (this.recent.size >= 10_000) this.recent.clear();
      this.recent.set(key, { token, until: now + (ASSERTION_TTL_SECONDS * 1000) / 2 });
    }
    return token;
  }
}

const invalid = (why: string) => new AppError('ASSERTION_INVALID', `Caller assertion refused: ${why}`);
const mismatch = (why: string) => new AppError('ASSERTION_MISMATCH', `Caller assertion refused: ${why}`);

/**
 * A backend's side: verifies with the pinned public keys, remembers the ids of write assertions it accepted
 * until they expire (a second use is a replay), and each read assertion's signature once (reused reads cost a
 * hash, not a verification).
 */
export class AssertionVerifier {
  private readonly keys = new Map<string, KeyObject>();
  private readonly now: () => number;
  // Two generations: an assertion lives at most 2 × TTL + skew, so what a generation holds is kept at least that long.
  private seen = new Set<string>();
  private previousSeen = new Set<string>();
  private verified = new Map<string, AssertionClaims>();
  private previousVerified = new Map<string, AssertionClaims>();
  private rotatedAt: number;

  /** publicKeys: base64 raw Ed25519 keys of the gateway (current and, during a rotation, the previous one). */
  constructor(publicKeys: string[], opts: { now?: () => number } = {}) {
    for (const b64 of publicKeys) this.keys.set(keyIdOf(Buffer.from(b64.trim(), 'base64')), ed25519PublicKey(b64));
    if (this.keys.size === 0) throw new Error('at least one gateway public key is needed');
    this.now = opts.now ?? Date.now;
    this.rotatedAt = this.now();
  }

  /**
   * The claims of a valid assertion for this subject and body, or an AppError: 401 ASSERTION_INVALID (missing,
   * forged, expired, replayed), 403 ASSERTION_MISMATCH (another subject or body). reusable: a read, which may
   * come more than once.
   */
  verify(token: string | undefined, subject: string, body: Uint8Array, reusable = false): AssertionClaims {
    if (!token) throw invalid('this subject acts for a user and needs an assertion signed by the gateway');
    this.rotate();
    const claims = this.verified.get(token) ?? this.previousVerified.get(token) ?? this.checkSignature(token);
    const now = Math.floor(this.now() / 1000);
    if (typeof claims.exp !== 'number' || typeof claims.iat !== 'number' || claims.exp <= now) throw invalid('expired');
    if (claims.iat > now + CLOCK_SKEW_SECONDS || claims.exp - claims.iat > ASSERTION_TTL_SECONDS * 2) throw invalid('issued in the future or for too long');
    if (claims.sbj !== subject) throw mismatch(`issued for ${String(claims.sbj).slice(0, 100)}, not ${subject}`);
    if (claims.bh !== bodyHash(body)) throw mismatch('the message body is not the one it was issued for');
    if (typeof claims.sub !== 'string' || typeof claims.jti !== 'string') throw invalid('malformed');
    if (reusable) {
      this.verified.set(token, claims);
    } else {
      if (this.seen.has(claims.jti) || this.previousSeen.has(claims.jti)) throw invalid('already used (a replay)');
      this.seen.add(claims.jti);
    }
    return claims;
  }

  private checkSignature(token: string): AssertionClaims {
    const [version, part, sig] = token.split('.');
    if (version !== 'v1' || !part || !sig) throw invalid('malformed');
    let claims: AssertionClaims;
    try {
      claims = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as AssertionClaims;
    } catch {
      throw invalid('malformed');
    }
    const key = typeof claims?.kid === 'string' ? this.keys.get(claims.kid) : undefined;
    if (!key) throw invalid('signed by an unknown key');
    if (!verify(null, Buffer.from(part), key, Buffer.from(sig, 'base64url'))) throw invalid('bad signature');
    return claims;
  }

  private rotate(): void {
    const now = this.now();
    if (now - this.rotatedAt <= (ASSERTION_TTL_SECONDS * 2 + CLOCK_SKEW_SECONDS) * 1000) return;
    this.previousSeen = this.seen;
    this.seen = new Set();
    this.previousVerified = this.verified;
    this.verified = new Map();
    this.rotatedAt = now;
  }
}
