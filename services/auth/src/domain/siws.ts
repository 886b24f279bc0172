/** The fields of a Sign-In With Solana message (the ABNF shared with EIP-4361). */
export interface SignInFields {
  domain: string;
  address: string;
  statement: string;
  uri: string;
  version: '1';
  chainId: string;
  nonce: string;
  issuedAt: string;
  expirationTime: string;
}

/**
 * The exact text the wallet signs. The server always rebuilds it from its stored nonce row, never from
 * text a client sends, so a client cannot make us accept a message we did not issue.
 */
export function signInMessage(f: SignInFields): string {
  return [
    `${f.domain} wants you to sign in with your Solana account:`,
    f.address,
    '',
    f.statement,
    '',
    `URI: ${f.uri}`,
    `Version: ${f.version}`,
    `Chain ID: ${f.chainId}`,
    `Nonce: ${f.nonce}`,
    `Issued At: ${f.issuedAt}`,
    `Expiration Time: ${f.expirationTime}`,
  ].join('\n');
}
