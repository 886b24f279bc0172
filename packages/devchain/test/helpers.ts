import { Connection, Keypair, LAMPORTS_PER_SOL } from '@solana/web3.js';
import type { Commitment, SignatureStatus, TransactionSignature } from '@solana/web3.js';
import { startDevchain } from '../src/index.ts';
import type { Devchain, DevchainOptions } from '../src/index.ts';

export interface TestChain {
  chain: Devchain;
  conn: Connection;
  /** A new keypair funded by an airdrop confirmed at 'confirmed'. */
  funded(sol?: number): Promise<Keypair>;
  rpc(method: string, params?: unknown): Promise<{ result?: any; error?: { code: number; message: string; data?: any } }>;
  close(): Promise<void>;
}

export async function startTestChain(options: DevchainOptions = {}): Promise<TestChain> {
  const chain = await startDevchain({ port: 0, ...options });
  const conn = new Connection(chain.url, 'confirmed');
  let id = 0;
  const rpc = async (method: string, params: unknown = []) => {
    const res = await fetch(chain.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
    });
    return (await res.json()) as { result?: any; error?: { code: number; message: string; data?: any } };
  };
  return {
    chain,
    conn,
    rpc,
    async funded(sol = 2) {
      const kp = Keypair.generate();
      const sig = await conn.requestAirdrop(kp.publicKey, sol * LAMPORTS_PER_SOL);
      await waitForStatus(conn, sig, 'confirmed');
      return kp;
    },
    close: () => chain.close(),
  };
}

const RANK: Record<string, number> = { processed: 0, confirmed: 1, finalized: 2 };

/** Polls getSignatureStatuses until the signature reaches `level` (failed transactions included). */
export async function waitForStatus(
  conn: Connection,
  signature: TransactionSignature,
  level: Commitment = 'confirmed',
  timeoutMs = 10_000,
): Promise<SignatureStatus> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { value } = await conn.getSignatureStatus(signature, { searchTransactionHistory: true });
    if (value?.confirmationStatus && (RANK[value.confirmationStatus] as number) >= (RANK[level] as number)) return value;
    if (Date.now() > deadline) throw new Error(`timeout waiting for ${signature} to reach ${level}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const DAY = 86_400;
