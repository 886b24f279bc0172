import { Connection, Keypair, PublicKey, Transaction, type TransactionInstruction } from '@solana/web3.js';
import bs58 from 'bs58';
import nacl from 'tweetnacl';
import { cancelInstruction, depositInstruction, subscribeInstruction, tierId, type TierName, waitConfirmed } from '@agenthost/subscription-program';
import { unwrap } from '@agenthost/sdk';
import { client, type Env } from './client.ts';
import { readJson, writeJson } from './state.ts';

export type { Env } from './client.ts';

export function loadWallet(): Keypair {
  const secret = readJson<number[]>('wallet.json');
  if (!secret) throw new Error('no wallet yet: run `agenthost wallet create`');
  return Keypair.fromSecretKey(Uint8Array.from(secret));
}

export async function walletCreate(env: Env): Promise<void> {
  if (readJson('wallet.json')) throw new Error('a wallet already exists; remove ~/.agenthost/wallet.json to make a new one');
  const kp = Keypair.generate();
  const file = writeJson('wallet.json', Array.from(kp.secretKey));
  env.out(`wallet ${kp.publicKey.toBase58()} saved to ${file}`);
}

export async function walletShow(env: Env): Promise<void> {
  env.out(loadWallet().publicKey.toBase58());
}

/** nonce → sign the server's Sign-In With Solana message → login; the token is kept for later calls. */
export async function login(env: Env): Promise<void> {
  const kp = loadWallet();
  const address = kp.publicKey.toBase58();
  const { api } = client(env);
  const n = unwrap(await api.GET('/auth/nonce', { params: { query: { wallet_address: address } } }));
  const signature = bs58.encode(nacl.sign.detached(new TextEncoder().encode(n.message), kp.secretKey));
  const session = unwrap(await api.POST('/auth/login', { body: { wallet_address: address, signature_base58: signature, nonce: n.nonce } }));
  writeJson('session.json', session);
  env.out(`signed in as ${address} (user ${session.user_id}) until ${session.expires_at}`);
}

async function chainConfig(env: Env): Promise<{ programId: PublicKey; treasury: PublicKey }> {
  const programId = process.env.SUBSCRIPTION_PROGRAM_ID;
  const treasury = process.env.TREASURY_ADDRESS;
  if (programId && treasury) return { programId: new PublicKey(programId), treasury: new PublicKey(treasury) };
  // devchain publishes its program id and treasury; a real cluster needs the two variables above.
  const res = await fetch(env.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'devchain_getConfig' }),
  });
  const body = (await res.json()) as { result?: { programId: string; treasury: string } };
  if (!body.result) throw new Error('set SUBSCRIPTION_PROGRAM_ID and TREASURY_ADDRESS (the RPC is not a devchain)');
  return { programId: new PublicKey(body.result.programId), treasury: new PublicKey(body.result.treasury) };
}

async function send(env: Env, ix: TransactionInstruction, kp: Keypair): Promise<string> {
  const connection = new Connection(env.rpcUrl, 'confirmed');
  const { blockhash, lastValidBlockHeight } = await connection.getLatestBlockhash();
  const tx = new Transaction({ feePayer: kp.publicKey, blockhash, lastValidBlockHeight }).add(ix);
  tx.sign(kp);
  const signature = await connection.sendRawTransaction(tx.serialize(), { preflightCommitment: 'confirmed' });
  await confirmed(connection, signature);
  return signature;
}

/** Wait until a transaction is confirmed; throw when it failed or took more than 30 s. */
async function confirmed(connection: Connection, signature: string): Promise<void> {
  const done = await waitConfirmed(connection, signature, { timeoutMs: 30_000, everyMs: 100 });
  if (!done) throw new Error(`transaction ${signature} was not confirmed in 30 s`);
  if (done.err) throw new Error(`transaction ${signature} failed: ${JSON.stringify(done.err)}`);
}

export async function airdrop(env: Env, sol: number): Promise<void> {
  const kp = loadWallet();
  const connection = new Connection(env.rpcUrl, 'confirmed');
  await confirmed(connection, await connection.requestAirdrop(kp.publicKey, Math.round(sol * 1e9)));
  env.out(`balance: ${(await connection.getBalance(kp.publicKey)) / 1e9} SOL`);
}

/** Send the subscribe transaction, then tell the service with POST /subscription/register. */
export async function subscribe(env: Env, tier: TierName): Promise<void> {
  const kp = loadWallet();
  const { programId, treasury } = await chainConfig(env);
  const signature = await send(env, subscribeInstruction({ programId, owner: kp.publicKey, treasury, tier: tierId(tier) }), kp);
  env.out(`subscribe transaction ${signature} confirmed`);
  const body = unwrap(await client(env, true).api.POST('/subscription/register', { body: { tx_signature: signature, tier: tierId(tier) } }));
  env.out(JSON.stringify(body, null, 2));
}

export async function deposit(env: Env, sol: number): Promise<void> {
  const kp = loadWallet();
  const { programId, treasury } = await chainConfig(env);
  env.out(
    `deposit ${await send(env, depositInstruction({ programId, owner: kp.publicKey, treasury, lamports: BigInt(Math.round(sol * 1e9)) }), kp)} confirmed`,
  );
}

export async function cancel(env: Env): Promise<void> {
  const kp = loadWallet();
  const { programId, treasury } = await chainConfig(env);
  env.out(`cancel ${await send(env, cancelInstruction({ programId, owner: kp.publicKey, treasury }), kp)} confirmed`);
}

/** Any API call with the saved token: `agenthost call POST /instance/create '{"framework":"openclaw"}'`. */
export async function call(env: Env, method: string, path: string, json?: string): Promise<number> {
  // A path typed by the user is checked by the API, not by the types: the generic request of the same client.
  const request = client(env, true).api.request as unknown as (
    method: string,
    path: string,
    init: { body?: unknown },
  ) => Promise<{ data?: unknown; error?: unknown; response: Response }>;
  const r = await request(method.toLowerCase(), path, json === undefined ? {} : { body: JSON.parse(json) });
  env.out(JSON.stringify(r.data ?? r.error ?? {}, null, 2));
  return r.response.ok ? 0 : 1;
}
