import { createHash } from 'node:crypto';
import bs58 from 'bs58';
import nacl from 'tweetnacl';
import { getOffchainMessageDecoder } from '@solana/offchain-messages';
import { parseSignInMessageText } from '@solana/wallet-standard-util';
import { AppError } from '@agenthost/shared';
import type { AuthConfig } from '../config.ts';

/** What a wallet-built sign-in proved, once every field checked out. */
export interface VerifiedSignIn {
  address: string;
  /** Our nonce it carries; absent for a message the wallet built from an empty input. */
  nonce?: string;
  issuedAt?: Date;
  /** SHA-256 of the signature: a nonce-less message is accepted once. */
  signatureHash: string;
}

/** Wallets sign "\xffsolana offchain"-prefixed envelopes with the newer off-chain message signing. */
const OFFCHAIN_PREFIX = Buffer.concat([Buffer.from([0xff]), Buffer.from('solana offchain', 'utf8')]);
/** A wallet's clock may run a little ahead of ours. */
const CLOCK_SKEW_MS = 60_000;
const CHAINS = new Set(['mainnet', 'testnet', 'devnet', 'localnet']);

const refused = (why: string) => new AppError('INVALID_SIGNATURE', `Sign-in refused: ${why}`);

/** The hosts a sign-in message may name: SIWS_DOMAINS, or SIWS_DOMAIN alone. */
function allowedDomains(config: AuthConfig): Set<string> {
  const list = config.SIWS_DOMAINS.split(',')
    .map((d) => d.trim().toLowerCase())
    .filter(Boolean);
  return new Set(list.length ? list : [config.SIWS_DOMAIN.toLowerCase()]);
}

const chainOf = (chainId: string): string => chainId.replace(/^solana:/, '');

function decode(text: string | undefined, as: 'base64' | 'base58'): Uint8Array | null {
  if (!text) return null;
  try {
    return as === 'base58' ? bs58.decode(text) : new Uint8Array(Buffer.from(text, 'base64'));
  } catch {
    return null;
  }
}

/** The text a wallet signed: the message itself, or the content of an off-chain message envelope signed by `signer`. */
function messageText(bytes: Uint8Array, signer: string): string {
  if (!Buffer.from(bytes.subarray(0, OFFCHAIN_PREFIX.length)).equals(OFFCHAIN_PREFIX)) return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  let m;
  try {
    m = getOffchainMessageDecoder().decode(bytes);
  } catch {
    throw refused('the off-chain message envelope cannot be read');
  }
  if (!m.requiredSignatories.some((s) => s.address === signer)) throw refused('the signer is not a signatory of the off-chain message');
  const content = m.content as unknown;
  return typeof content === 'string' ? content : (content as { text: string }).text;
}

/**
 * Verifies a Sign-In With Solana message built by the wallet, field by field (the wallet may set the domain from
 * the page, omit optional fields, or wrap the text in an off-chain message envelope): the signature by the signer,
 * the address is the signer, the domain and URI are ours, the chain id is valid SIWS and our cluster, and the times
 * hold. The nonce (if any) is checked by the caller, which consumes it.
 */
export function verifyWalletSignIn(
  config: AuthConfig,
  input: { signer: string; signedMessageBase64: string; signatureBase64?: string; signatureBase58?: string },
  now = new Date(),
): VerifiedSignIn {
  const pub = decode(input.signer, 'base58');
  const bytes = decode(input.signedMessageBase64, 'base64');
  const sig = input.signatureBase64 ? decode(input.signatureBase64, 'base64') : decode(input.signatureBase58, 'base58');
  if (pub?.length !== 32 || !bytes || !sig || sig.length !== 64) throw new AppError('INVALID_SIGNATURE');
  if (!nacl.sign.detached.verify(bytes, sig, pub)) throw new AppError('INVALID_SIGNATURE');

  let text: string;
  try {
    text = messageText(bytes, input.signer);
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw refused('the signed message is not UTF-8 text');
  }
  const f = parseSignInMessageText(text);
  if (!f) throw refused('the signed message is not a Sign-In With Solana message');
  if (f.address !== input.signer) throw refused('the message names another account than the one that signed it');
  const domains = allowedDomains(config);
  if (!domains.has(f.domain.toLowerCase())) throw refused(`the domain ${JSON.stringify(f.domain)} is not one this service signs in for`);
  if (f.uri !== undefined) {
    let host: string;
    try {
      host = new URL(f.uri).host.toLowerCase();
    } catch {
      throw refused('the URI is not a URL');
    }
    if (!domains.has(host)) throw refused(`the URI ${JSON.stringify(f.uri)} is not on a domain this service signs in for`);
  }
  if (f.version !== undefined && f.version !== '1') throw refused(`version ${JSON.stringify(f.version)} is not 1`);
  if (f.chainId !== undefined) {
    if (!CHAINS.has(chainOf(f.chainId)))
      throw refused(`chain id ${JSON.stringify(f.chainId)} is not a Sign-In With Solana chain id (mainnet, testnet, devnet or localnet)`);
    if (chainOf(f.chainId) !== chainOf(config.SIWS_CHAIN_ID))
      throw refused(`the message is for ${chainOf(f.chainId)}, this service runs on ${chainOf(config.SIWS_CHAIN_ID)}`);
  }
  const time = (name: string, v: string | undefined): Date | undefined => {
    if (v === undefined) return undefined;
    const t = new Date(v);
    if (Number.isNaN(t.getTime())) throw refused(`${name} is not a time`);
    return t;
  };
  const issuedAt = time('Issued At', f.issuedAt);
  const expires = time('Expiration Time', f.expirationTime);
  const notBefore = time('Not Before', f.notBefore);
  if (issuedAt && issuedAt.getTime() > now.getTime() + CLOCK_SKEW_MS) throw refused('it was issued in the future');
  if (expires && expires.getTime() <= now.getTime()) throw refused('the message has expired');
  if (notBefore && notBefore.getTime() > now.getTime() + CLOCK_SKEW_MS) throw refused('the message is not valid yet');
  return {
    address: input.signer,
    ...(f.nonce !== undefined ? { nonce: f.nonce } : {}),
    ...(issuedAt ? { issuedAt } : {}),
    signatureHash: createHash('sha256').update(sig).digest('hex'),
  };
}
