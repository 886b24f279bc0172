import { Connection, Keypair, Transaction } from '@solana/web3.js';
import bs58 from 'bs58';
import nacl from 'tweetnacl';
import type { Page } from 'puppeteer-core';
import { recordSecret } from '@agenthost/testkit';

/**
 * A wallet for the browser tests: the page sees a Wallet Standard wallet ("Test Wallet", registered by a script
 * that runs before the page's own), whose signing calls come here, to a real Ed25519 key held in Node, and whose
 * transactions are sent to the stack's devchain. `decline` makes it refuse the next signature, as a user would.
 * With `bindToPage` it builds the Sign-In With Solana message as Phantom does: the domain is the page's host and the
 * URI its origin, whatever the page asked for.
 */
export class TestWallet {
  readonly keypair = Keypair.generate();
  readonly address = this.keypair.publicKey.toBase58();
  decline = false;
  signed = 0;
  /** The texts it signed (sign-in messages; transactions go through __testWalletSignAndSend). */
  readonly messages: string[] = [];

  private readonly rpcUrl: string;
  /** The wallet's name on the page; `signIn: false` makes a wallet without solana:signIn (sign-in by signMessage). */
  readonly options: WalletOptions;

  constructor(rpcUrl: string, options: Partial<WalletOptions> = {}) {
    this.rpcUrl = rpcUrl;
    this.options = { name: options.name ?? 'Test Wallet', signIn: options.signIn ?? true, bindToPage: options.bindToPage ?? false };
    recordSecret(bs58.encode(this.keypair.secretKey));
  }

  private refuse(): void {
    if (this.decline) {
      this.decline = false;
      throw new Error('User rejected the request.');
    }
  }

  async install(page: Page): Promise<void> {
    await page.exposeFunction('__testWalletSign', (bytes: number[]) => {
      this.refuse();
      this.signed++;
      this.messages.push(Buffer.from(bytes).toString('utf8'));
      return Array.from(nacl.sign.detached(Uint8Array.from(bytes), this.keypair.secretKey));
    });
    await page.exposeFunction('__testWalletSignAndSend', async (bytes: number[]) => {
      this.refuse();
      const tx = Transaction.from(Uint8Array.from(bytes));
      tx.partialSign(this.keypair);
      const signature = await new Connection(this.rpcUrl, 'confirmed').sendRawTransaction(tx.serialize(), { preflightCommitment: 'confirmed' });
      return Array.from(bs58.decode(signature));
    });
    await page.evaluateOnNewDocument(registerInPage, this.address, Array.from(this.keypair.publicKey.toBytes()), this.options);
  }
}

interface WalletOptions {
  name: string;
  signIn: boolean;
  /** Build the sign-in message for the page it runs on (its host and origin), as Phantom does. */
  bindToPage: boolean;
}

/** Runs in the page before its scripts: the Wallet Standard registration protocol, by hand. */
function registerInPage(address: string, publicKey: number[], options: WalletOptions): void {
  type Bytes = number[];
  // Typed by hand: this file is compiled for Node (no DOM library), but this function runs in the page.
  const w = globalThis as unknown as {
    __testWalletSign(b: Bytes): Promise<Bytes>;
    __testWalletSignAndSend(b: Bytes): Promise<Bytes>;
    dispatchEvent(e: Event): void;
    addEventListener(type: string, listener: (e: Event) => void): void;
    location: { host: string; origin: string };
  };
  const chains = ['solana:localnet'];
  const account = {
    address,
    publicKey: new Uint8Array(publicKey),
    chains,
    features: [...(options.signIn ? ['solana:signIn'] : []), 'solana:signMessage', 'solana:signAndSendTransaction'],
    label: 'Test account',
  };
  let connected = false;
  const sign = async (message: Uint8Array) => new Uint8Array(await w.__testWalletSign(Array.from(message)));
  // The Sign-In With Solana text as wallets build it from the input's fields (the ABNF of EIP-4361).
  const siws = (i: Record<string, string | undefined>) =>
    [
      `${options.bindToPage ? w.location.host : i.domain} wants you to sign in with your Solana account:`,
      i.address ?? address,
      '',
      i.statement,
      '',
      `URI: ${options.bindToPage ? w.location.origin : i.uri}`,
      `Version: ${i.version}`,
      `Chain ID: ${i.chainId}`,
      `Nonce: ${i.nonce}`,
      `Issued At: ${i.issuedAt}`,
      `Expiration Time: ${i.expirationTime}`,
    ].join('\n');
  const wallet = {
    version: '1.0.0',
    name: options.name,
    icon: `data:image/svg+xml;base64,${btoa('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 8 8"><rect width="8" height="8" fill="#3451b2"/></svg>')}`,
    chains,
    get accounts() {
      return connected ? [account] : [];
    },
    features: {
      'standard:connect': { version: '1.0.0', connect: async () => ((connected = true), { accounts: [account] }) },
      'standard:disconnect': { version: '1.0.0', disconnect: async () => void (connected = false) },
      'standard:events': { version: '1.0.0', on: () => () => {} },
      ...(options.signIn
        ? {
            'solana:signIn': {
              version: '1.0.0',
              signIn: async (...inputs: Record<string, string | undefined>[]) =>
                Promise.all(
                  inputs.map(async (input) => {
                    const signedMessage = new TextEncoder().encode(siws(input));
                    return { account, signedMessage, signature: await sign(signedMessage), signatureType: 'ed25519' };
                  }),
                ),
            },
          }
        : {}),
      'solana:signMessage': {
        version: '1.0.0',
        signMessage: async (...inputs: { message: Uint8Array }[]) =>
          Promise.all(inputs.map(async ({ message }) => ({ signedMessage: message, signature: await sign(message) }))),
      },
      'solana:signAndSendTransaction': {
        version: '1.0.0',
        supportedTransactionVersions: ['legacy'],
        signAndSendTransaction: async (...inputs: { transaction: Uint8Array }[]) =>
          Promise.all(inputs.map(async ({ transaction }) => ({ signature: new Uint8Array(await w.__testWalletSignAndSend(Array.from(transaction))) }))),
      },
    },
  };
  const callback = ({ register }: { register(w: unknown): void }) => register(wallet);
  w.dispatchEvent(new CustomEvent('wallet-standard:register-wallet', { detail: callback }));
  w.addEventListener('wallet-standard:app-ready', (e) => callback((e as CustomEvent).detail));
}
