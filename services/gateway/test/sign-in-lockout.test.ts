import bs58 from 'bs58';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AddressedReply, gatewayUrl, newWallet, requestFrom, startStack, type Stack, type Wallet } from '@agenthost/testkit';

// A wallet's address is public: nobody may lock its owner out of sign-in by sending garbage in its name
// (security review, issue 29, finding 5). Small limits, so that a test reaches them in a few requests.
const PER_ADDRESS = 30;
const PER_WALLET = 4;
/** More nonces than failed logins per wallet and client: an owner signing in often needs a nonce each time. */
const NONCES_PER_WALLET = 8;

let stack: Stack;
let db: pg.Client;

beforeAll(async () => {
  stack = await startStack({
    services: ['auth'],
    serviceEnv: {
      gateway: {
        NONCES_PER_ADDRESS: String(PER_ADDRESS),
        LOGINS_PER_ADDRESS: String(PER_ADDRESS),
        NONCES_PER_WALLET: String(NONCES_PER_WALLET),
        LOGINS_PER_WALLET: String(PER_WALLET),
        SIGN_IN_WINDOW_SECONDS: '600',
      },
    },
  });
  db = new pg.Client({ connectionString: stack.db.url });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  await stack?.stop();
});

const send = (from: string, method: 'GET' | 'POST', path: string, body?: unknown) =>
  requestFrom(`${gatewayUrl(stack.gateways[0]!)}${path}`, { from, method, body });
const nonce = (from: string, wallet: string) => send(from, 'GET', `/auth/nonce?wallet_address=${wallet}`);
/** A login in the victim's name that nobody signed: our message's shape, then a wallet-built message's shape. */
const garbage = (from: string, wallet: string, i: number) =>
  send(
    from,
    'POST',
    '/auth/login',
    i % 2 === 0
      ? { wallet_address: wallet, signature_base58: bs58.encode(new Uint8Array(64)), nonce: 'x'.repeat(22) }
      : { account: { address: wallet }, signedMessage: Buffer.from('not a message').toString('base64'), signature: Buffer.alloc(64).toString('base64') },
  );

/** The owner's real sign-in: a nonce, our message signed by the wallet's key, the login. */
async function signInAs(from: string, wallet: Wallet): Promise<AddressedReply> {
  const n = await nonce(from, wallet.address);
  if (n.status !== 200) return n;
  return send(from, 'POST', '/auth/login', {
    wallet_address: wallet.address,
    signature_base58: bs58.encode(wallet.sign(n.body.message as string)),
    nonce: n.body.nonce,
  });
}

const expectLimited = (r: AddressedReply) => {
  expect(r.status).toBe(429);
  expect(r.body).toEqual({ error: expect.stringMatching(/retry in \d+ s/), code: 'RATE_LIMITED', status: 429 });
  expect(Number(r.retryAfter)).toBeGreaterThan(0);
};

describe("sign-in limits and a wallet's owner", () => {
  it('still signs the owner in after a client sent 12 garbage logins and 12 nonce requests in its name', async () => {
    const victim = newWallet();
    const logins: number[] = [];
    for (let i = 0; i < 12; i++) logins.push((await garbage('127.0.5.1', victim.address, i)).status);
    // The attacker's own client is limited after PER_WALLET failures for this wallet...
    expect(logins.slice(0, PER_WALLET).every((s) => s === 401)).toBe(true);
    expect(logins.slice(PER_WALLET)).toEqual(Array(12 - PER_WALLET).fill(429));
    expectLimited(await garbage('127.0.5.1', victim.address, 0));
    const nonces: number[] = [];
    for (let i = 0; i < 12; i++) nonces.push((await nonce('127.0.5.1', victim.address)).status);
    expect(nonces).toEqual([...Array(NONCES_PER_WALLET).fill(200), ...Array(12 - NONCES_PER_WALLET).fill(429)]);

    // ...and the owner, from their own address, signs in.
    const owner = await signInAs('127.0.5.2', victim);
    expect(owner.status, JSON.stringify(owner.body)).toBe(200);
    expect(owner.body.wallet_address).toBe(victim.address);
  });

  it('limits repeated bad signatures for one wallet from one client, while that client still signs in another wallet', async () => {
    const target = newWallet();
    const impostor = newWallet();
    const tries: AddressedReply[] = [];
    for (let i = 0; i < PER_WALLET + 2; i++) {
      // A real nonce of the target's (asked for from elsewhere), signed by another key: a bad signature.
      const n = await nonce(`127.0.6.${i + 1}`, target.address);
      const signature = bs58.encode(impostor.sign(n.body.message as string));
      tries.push(await send('127.0.5.3', 'POST', '/auth/login', { wallet_address: target.address, signature_base58: signature, nonce: n.body.nonce }));
    }
    expect(tries.map((r) => r.status)).toEqual([...Array(PER_WALLET).fill(401), 429, 429]);
    expect(tries[0]!.body.code).toBe('INVALID_SIGNATURE');
    expectLimited(tries.at(-1)!);
    expect((await signInAs('127.0.5.3', newWallet())).status).toBe(200);
  });

  it('never counts successful logins against a wallet: its owner signs in more often than the failure limit', async () => {
    const wallet = newWallet();
    const statuses: number[] = [];
    for (let i = 0; i < PER_WALLET + 2; i++) statuses.push((await signInAs('127.0.5.4', wallet)).status);
    expect(statuses).toEqual(Array(PER_WALLET + 2).fill(200));
  });

  it('lets a flood of valid-looking unsigned logins for fresh wallets reach auth only as often as the address limit allows', async () => {
    const rowsBefore = Number((await db.query('select count(*) as n from gateway.sign_in_limits')).rows[0].n);
    const statuses = new Map<number, number>();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 20; i++) {
          const r = await garbage('127.0.5.5', newWallet().address, i);
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        }
      }),
    );
    // Every 401 is an answer from auth: exactly the address's limit got there, the rest was refused before.
    expect(Object.fromEntries(statuses)).toEqual({ 401: PER_ADDRESS, 429: 160 - PER_ADDRESS });
    // One row for the address and one per failed wallet it named, never one per request.
    const rowsAfter = Number((await db.query('select count(*) as n from gateway.sign_in_limits')).rows[0].n);
    expect(rowsAfter - rowsBefore).toBeLessThanOrEqual(PER_ADDRESS + 1);
  }, 60_000);
});
