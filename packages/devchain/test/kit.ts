/** Driving devchain with @solana/kit: its RPC and subscriptions clients, instructions and codecs built with kit only. */
import {
  AccountRole,
  address,
  airdropFactory,
  appendTransactionMessageInstructions,
  createSolanaRpc,
  createSolanaRpcSubscriptions,
  createTransactionMessage,
  fixCodecSize,
  generateKeyPairSigner,
  getAddressCodec,
  getBooleanCodec,
  getBytesCodec,
  getI64Codec,
  getSignatureFromTransaction,
  getStructCodec,
  getU32Encoder,
  getU64Encoder,
  getU8Codec,
  getUtf8Encoder,
  lamports,
  pipe,
  sendAndConfirmTransactionFactory,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
} from '@solana/kit';
import type { Address, Instruction, KeyPairSigner, Signature } from '@solana/kit';
import type { TransactionInstruction } from '@solana/web3.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { zstdDecompressSync } from 'node:zlib';
import { startTestChain } from './helpers.ts';
import type { TestChain } from './helpers.ts';

export const SYSTEM_PROGRAM = address('11111111111111111111111111111111');
export const MEMO_PROGRAM = address('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');

/** The subscription program's account layout (packages/subscription-program/src/layout.ts), as a kit codec. */
export const subscriptionCodec = getStructCodec([
  ['discriminator', fixCodecSize(getBytesCodec(), 8)],
  ['tier', getU8Codec()],
  ['expiresAt', getI64Codec()],
  ['isActive', getBooleanCodec()],
  ['owner', getAddressCodec()],
  ['bump', getU8Codec()],
]);

/** Account data sent as base64+zstd, back to its bytes. */
export const unzstd = (base64: string): Uint8Array => new Uint8Array(zstdDecompressSync(Buffer.from(base64, 'base64')));

export function transferInstruction(from: Address, to: Address, amount: bigint): Instruction {
  const data = new Uint8Array([...getU32Encoder().encode(2), ...getU64Encoder().encode(amount)]);
  return {
    programAddress: SYSTEM_PROGRAM,
    accounts: [
      { address: from, role: AccountRole.WRITABLE_SIGNER },
      { address: to, role: AccountRole.WRITABLE },
    ],
    data,
  };
}

export function memoInstruction(signer: Address, text: string): Instruction {
  return { programAddress: MEMO_PROGRAM, accounts: [{ address: signer, role: AccountRole.READONLY_SIGNER }], data: getUtf8Encoder().encode(text) };
}

/** A web3.js instruction (the subscription program's builders) as a kit instruction. */
export function fromWeb3(ix: TransactionInstruction): Instruction {
  return {
    programAddress: address(ix.programId.toBase58()),
    accounts: ix.keys.map((k) => ({
      address: address(k.pubkey.toBase58()),
      role: k.isSigner
        ? k.isWritable
          ? AccountRole.WRITABLE_SIGNER
          : AccountRole.READONLY_SIGNER
        : k.isWritable
          ? AccountRole.WRITABLE
          : AccountRole.READONLY,
    })),
    data: new Uint8Array(ix.data),
  };
}

export async function startKitChain() {
  const t: TestChain = await startTestChain();
  const rpc = createSolanaRpc(t.chain.url);
  const subscriptions = createSolanaRpcSubscriptions(t.chain.wsUrl);
  const airdrop = airdropFactory({ rpc, rpcSubscriptions: subscriptions });
  const sendAndConfirm = sendAndConfirmTransactionFactory({ rpc, rpcSubscriptions: subscriptions });

  return {
    t,
    rpc,
    subscriptions,
    /** A new signer funded by a confirmed airdrop. */
    async funded(sol = 2n): Promise<KeyPairSigner> {
      const signer = await generateKeyPairSigner();
      await airdrop({ recipientAddress: signer.address, lamports: lamports(sol * 1_000_000_000n), commitment: 'confirmed' });
      return signer;
    },
    /** Signs with the payer, sends, and waits for `confirmed` through signatureSubscribe. */
    async send(payer: KeyPairSigner, instructions: Instruction[], version: 0 | 'legacy' = 0): Promise<Signature> {
      const { value: blockhash } = await rpc.getLatestBlockhash({ commitment: 'confirmed' }).send();
      const message = pipe(
        createTransactionMessage({ version }),
        (m) => setTransactionMessageFeePayerSigner(payer, m),
        (m) => setTransactionMessageLifetimeUsingBlockhash(blockhash, m),
        (m) => appendTransactionMessageInstructions(instructions, m),
      );
      const signed = await signTransactionMessageWithSigners(message);
      await sendAndConfirm(signed as Parameters<typeof sendAndConfirm>[0], { commitment: 'confirmed' });
      return getSignatureFromTransaction(signed);
    },
    close: () => t.close(),
  };
}

export type KitChain = Awaited<ReturnType<typeof startKitChain>>;

/**
 * Starts reading a kit notification stream at once: kit hands a notification only to an
 * iterator that is already waiting, so one made after the event would miss it.
 */
export function listen<T>(stream: AsyncIterable<T>) {
  const seen: T[] = [];
  let failure: unknown;
  void (async () => {
    try {
      for await (const n of stream) seen.push(n);
    } catch (e) {
      failure = e ?? new Error('stream failed');
    }
  })();
  return {
    seen,
    /** The first notification that passes `accept`; rejects after timeoutMs. */
    async first(accept: (n: T) => boolean = () => true, timeoutMs = 5000): Promise<T> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const hit = seen.find(accept);
        if (hit !== undefined) return hit;
        if (failure !== undefined) throw failure;
        if (Date.now() > deadline) throw new Error(`no matching notification within ${timeoutMs} ms`);
        await sleep(20);
      }
    },
  };
}
