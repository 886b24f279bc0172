import { Connection, Keypair, LAMPORTS_PER_SOL, SystemProgram, Transaction, sendAndConfirmTransaction } from '@solana/web3.js';
import bs58 from 'bs58';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevchain } from '../src/index.ts';
import { startTestChain, waitForStatus } from './helpers.ts';
import type { TestChain } from './helpers.ts';

let t: TestChain;
beforeAll(async () => {
  t = await startTestChain();
});
afterAll(async () => {
  await t.close();
});

const post = async (body: string, url = t.chain.url) => {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
};

describe('JSON-RPC envelope', () => {
  it('answers unknown methods with -32601', async () => {
    expect((await t.rpc('getFees')).error?.code).toBe(-32601);
  });

  it('answers malformed JSON with a parse error and id null', async () => {
    const { status, body } = await post('{"jsonrpc":"2.0",');
    expect(status).toBe(200);
    expect(body).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
  });

  it('answers invalid request objects with -32600', async () => {
    expect((await post('{"id":1,"method":"getSlot"}')).body.error.code).toBe(-32600);
    expect((await post('[]')).body.error.code).toBe(-32600);
    expect((await post('42')).body.error.code).toBe(-32600);
    expect((await post('{"jsonrpc":"2.0","id":{},"method":"getSlot"}')).body.error.code).toBe(-32600);
    expect((await post('{"jsonrpc":"2.0","id":1,"method":"getSlot","params":5}')).body.error.code).toBe(-32602);
  });

  it('answers bad params with -32602 and keeps serving', async () => {
    const bad = [
      ['getBalance', ['not-a-key']],
      ['getBalance', [42]],
      ['getAccountInfo', []],
      ['getBalance', [Keypair.generate().publicKey.toBase58(), { commitment: 'sometime' }]],
      ['sendTransaction', ['%%%', { encoding: 'base64' }]],
      ['sendTransaction', ['AAAA', { encoding: 'base64' }]],
      ['sendTransaction', ['abc', { encoding: 'base32' }]],
      ['getSignatureStatuses', ['x']],
      ['getTransaction', ['1111']],
      ['getTransaction', [bs58.encode(new Uint8Array(64)), { commitment: 'processed' }]],
      ['getSignaturesForAddress', [Keypair.generate().publicKey.toBase58(), { limit: 5000 }]],
      ['requestAirdrop', [Keypair.generate().publicKey.toBase58(), -5]],
      ['getMinimumBalanceForRentExemption', ['x']],
      ['devchain_advanceClock', { seconds: -1 }],
    ] as const;
    for (const [method, params] of bad) {
      const res = await t.rpc(method, params);
      expect(res.error?.code, `${method} ${JSON.stringify(params)}`).toBe(-32602);
    }
    expect((await t.rpc('getHealth')).result).toBe('ok');
  });

  it('answers odd params of every method with a result or a validation error, never an internal error', async () => {
    const methods = [
      'getLatestBlockhash',
      'isBlockhashValid',
      'getBlockHeight',
      'getSlot',
      'getEpochInfo',
      'getVersion',
      'getHealth',
      'getGenesisHash',
      'getMinimumBalanceForRentExemption',
      'getBalance',
      'getAccountInfo',
      'getMultipleAccounts',
      'requestAirdrop',
      'sendTransaction',
      'simulateTransaction',
      'getSignatureStatuses',
      'getTransaction',
      'getSignaturesForAddress',
      'getFeeForMessage',
      'getRecentPrioritizationFees',
      'getProgramAccounts',
      'getBlock',
      'getBlockTime',
      'getBlocks',
      'getBlocksWithLimit',
      'getEpochSchedule',
      'getTransactionCount',
      'getSupply',
      'getSlotLeaders',
      'getLargestAccounts',
      'getTokenAccountsByOwner',
      'getTokenAccountBalance',
      'getTokenSupply',
      'devchain_advanceClock',
      'devchain_getClock',
      'devchain_getConfig',
    ];
    const random = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(Math.random() * 256))).toString('base64');
    const odd: unknown[] = [
      [null],
      [{}],
      [1, 2, 3],
      { a: 1 },
      [[]],
      ['x', 'y'],
      [random(200), { encoding: 'base64' }],
      [random(64)],
      [true, { commitment: 5 }],
      [[1], { dataSlice: { offset: -1 } }],
    ];
    for (const method of methods) {
      for (const params of odd) {
        const res = await t.rpc(method, params);
        expect('result' in res || res.error?.code !== undefined, method).toBe(true);
        expect(res.error?.code, `${method} ${JSON.stringify(params)}: ${res.error?.message}`).not.toBe(-32603);
      }
    }
    expect((await t.rpc('getHealth')).result).toBe('ok');
  });

  it('reads integers beyond 2^53 exactly: echoes a u64 id and refuses a huge commitment as a param error', async () => {
    const text = await (
      await fetch(t.chain.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":18446744073709551615,"method":"getHealth"}',
      })
    ).text();
    expect(text).toBe('{"jsonrpc":"2.0","id":18446744073709551615,"result":"ok"}');
    const huge = await post('{"jsonrpc":"2.0","id":1,"method":"getSlot","params":[{"commitment":99999999999999999999}]}');
    expect(huge.body.error.code).toBe(-32602);
  });

  it('serves batches in order and skips notifications', async () => {
    const { body } = await post(
      JSON.stringify([
        { jsonrpc: '2.0', id: 'a', method: 'getHealth' },
        { jsonrpc: '2.0', method: 'getSlot' },
        { jsonrpc: '2.0', id: 'b', method: 'nope' },
      ]),
    );
    expect(body).toEqual([
      { jsonrpc: '2.0', id: 'a', result: 'ok' },
      { jsonrpc: '2.0', id: 'b', error: { code: -32601, message: 'Method not found' } },
    ]);
  });

  it('serves GET /health and refuses other verbs', async () => {
    expect(await (await fetch(`${t.chain.url}/health`)).text()).toBe('ok');
    expect((await fetch(t.chain.url, { method: 'PUT' })).status).toBe(405);
  });
});

describe('cluster info', () => {
  it('serves the methods Connection uses for cluster state', async () => {
    const version = await t.conn.getVersion();
    expect(version['solana-core']).toMatch(/^\d+\.\d+\.\d+/);
    const slot = await t.conn.getSlot('processed');
    // one batch: no slot can pass between the three answers
    const { body } = await post(
      JSON.stringify(
        (['processed', 'confirmed', 'finalized'] as const).map((commitment, id) => ({
          jsonrpc: '2.0',
          id,
          method: 'getBlockHeight',
          params: [{ commitment }],
        })),
      ),
    );
    const [p, c, f] = (body as Array<{ result: number }>).map((r) => r.result);
    expect([c, f]).toEqual([p! - 1, p! - 4]);
    const epoch = await t.conn.getEpochInfo('processed');
    expect(epoch.absoluteSlot).toBeGreaterThanOrEqual(slot);
    expect(bs58.decode(await t.conn.getGenesisHash())).toHaveLength(32);
    expect(await t.conn.getRecentPrioritizationFees()).toEqual([]);
    const { blockhash } = await t.conn.getLatestBlockhash('confirmed');
    expect((await t.conn.isBlockhashValid(blockhash)).value).toBe(true);
    expect((await t.conn.isBlockhashValid(Keypair.generate().publicKey.toBase58())).value).toBe(false);
  });

  it('quotes 5000 lamports per signature in getFeeForMessage', async () => {
    const payer = Keypair.generate();
    const { blockhash } = await t.conn.getLatestBlockhash();
    const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: Keypair.generate().publicKey, lamports: 1 }),
    );
    expect((await t.conn.getFeeForMessage(tx.compileMessage())).value).toBe(5000);
  });

  it('simulates without committing anything', async () => {
    const from = await t.funded(1);
    const to = Keypair.generate();
    const tx = new Transaction().add(SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to.publicKey, lamports: LAMPORTS_PER_SOL / 2 }));
    tx.feePayer = from.publicKey;
    const sim = await t.conn.simulateTransaction(tx, [from], [to.publicKey]);
    expect(sim.value.err).toBeNull();
    expect(sim.value.logs).toContain('Program 11111111111111111111111111111111 success');
    expect(sim.value.accounts?.[0]?.lamports).toBe(LAMPORTS_PER_SOL / 2);
    expect(await t.conn.getBalance(to.publicKey, 'processed')).toBe(0);
  });

  it('accepts base58-encoded sendTransaction and lists the sender in getMultipleAccounts', async () => {
    const from = await t.funded(1);
    const to = Keypair.generate();
    const { blockhash } = await t.conn.getLatestBlockhash();
    const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to.publicKey, lamports: LAMPORTS_PER_SOL / 4 }),
    );
    tx.sign(from);
    const res = await t.rpc('sendTransaction', [bs58.encode(tx.serialize()), { preflightCommitment: 'confirmed' }]);
    expect(res.error).toBeUndefined();
    await waitForStatus(t.conn, res.result, 'confirmed');
    const infos = await t.conn.getMultipleAccountsInfo([from.publicKey, to.publicKey, Keypair.generate().publicKey]);
    expect(infos.map((i) => i?.lamports ?? null)).toEqual([LAMPORTS_PER_SOL * 0.75 - 5000, LAMPORTS_PER_SOL / 4, null]);
  });
});

describe('websocket endpoints', () => {
  it('confirms through the same-port endpoint as well as the port+1 default', async () => {
    expect(t.chain.wsAliasUrl).toBe(`ws://127.0.0.1:${t.chain.config.port + 1}`);
    const conn = new Connection(t.chain.url, { commitment: 'confirmed', wsEndpoint: t.chain.wsUrl });
    const from = await t.funded(1);
    const tx = new Transaction().add(
      SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: Keypair.generate().publicKey, lamports: LAMPORTS_PER_SOL / 2 }),
    );
    const sig = await sendAndConfirmTransaction(conn, tx, [from], { commitment: 'confirmed' });
    expect((await conn.getSignatureStatus(sig)).value?.err).toBeNull();
  });

  it('answers garbage on the websocket with JSON-RPC errors', async () => {
    const ws = new WebSocket(t.chain.wsUrl);
    await new Promise((r) => ws.addEventListener('open', r, { once: true }));
    const replies: unknown[] = [];
    const got = new Promise<void>((resolve) =>
      ws.addEventListener('message', (m) => {
        replies.push(JSON.parse(String(m.data)));
        if (replies.length === 3) resolve();
      }),
    );
    ws.send('not json');
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getSlot' }));
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'signatureSubscribe', params: ['bad'] }));
    await got;
    ws.close();
    expect(replies).toEqual([
      { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } },
      { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found' } },
      { jsonrpc: '2.0', id: 2, error: { code: -32602, message: expect.stringMatching(/Invalid params/) } },
    ]);
  });
});

describe('dev clock', () => {
  it('advances the chain clock through JSON-RPC and the in-process handle', async () => {
    const before = (await t.rpc('devchain_getClock')).result.unixTimestamp;
    const after = (await t.rpc('devchain_advanceClock', { seconds: 3600 })).result;
    expect(after - before).toBeGreaterThanOrEqual(3600);
    expect(after - before).toBeLessThan(3600 + 5);
    const later = t.chain.advanceClock(60);
    expect(later - after).toBeGreaterThanOrEqual(60);
    expect((await t.rpc('devchain_advanceClock', [0])).result).toBeGreaterThanOrEqual(later);
  });

  it('stamps transactions with the chain clock as blockTime', async () => {
    const now = t.chain.advanceClock(7 * 86_400);
    const kp = await t.funded(1);
    const [entry] = await t.conn.getSignaturesForAddress(kp.publicKey, {}, 'confirmed');
    expect(entry?.blockTime).toBeGreaterThanOrEqual(now);
  });

  it('hides devchain_* methods when dev methods are disabled', async () => {
    const other = await startDevchain({ port: 0, devMethods: false, wsPortAlias: false });
    try {
      const res = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'devchain_advanceClock', params: [10] }), other.url);
      expect(res.body.error.code).toBe(-32601);
      expect(other.wsAliasUrl).toBeNull();
    } finally {
      await other.close();
    }
  });
});
