import { Keypair, LAMPORTS_PER_SOL } from '@solana/web3.js';
import bs58 from 'bs58';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAUCET } from '../src/index.ts';
import { startTestChain } from './helpers.ts';
import type { TestChain } from './helpers.ts';

let t: TestChain;
const identity = FAUCET.publicKey.toBase58();

beforeAll(async () => {
  t = await startTestChain({ perfSampleSeconds: 1 });
});
afterAll(async () => {
  await t.close();
});

describe('the one validator, through JSON-RPC and web3.js', () => {
  it('lists itself as the only cluster node, with its RPC and PubSub addresses', async () => {
    const [node, ...others] = await t.conn.getClusterNodes();
    expect(others).toEqual([]);
    const port = t.chain.config.port;
    expect(node).toMatchObject({ pubkey: identity, rpc: `127.0.0.1:${port}`, pubsub: `127.0.0.1:${port + 1}`, gossip: null, tpu: null });
    const raw = (await t.rpc('getClusterNodes')).result[0];
    expect(Object.keys(raw)).toEqual([
      'pubkey',
      'gossip',
      'tvu',
      'tpu',
      'tpuQuic',
      'tpuForwards',
      'tpuForwardsQuic',
      'tpuVote',
      'serveRepair',
      'rpc',
      'pubsub',
      'version',
      'featureSet',
      'shredVersion',
    ]);
    expect(raw.featureSet).toBe((await t.conn.getVersion())['feature-set']);
    // agave's shred version: the genesis hash folded into 16 bits, plus one
    const hash = bs58.decode(await t.conn.getGenesisHash());
    let folded = 0;
    for (let i = 0; i < 32; i += 2) folded ^= (hash[i]! << 8) | hash[i + 1]!;
    expect(raw.shredVersion).toBe(Math.min(folded + 1, 0xffff));
    expect((await t.rpc('getClusterNodes', [1])).error).toEqual({ code: -32602, message: 'Invalid parameters: No parameters were expected' });
  });

  it('names its identity as leader of every slot of the epoch, and knows no schedule two epochs ahead', async () => {
    // web3.js reads it too (inflation.unit.test.ts, on short epochs: checking 432,000 numbers blocks this process for seconds)
    const schedule = (await t.rpc('getLeaderSchedule')).result as Record<string, number[]>;
    expect(Object.keys(schedule)).toEqual([identity]);
    const slots = schedule[identity]!;
    expect(slots).toHaveLength(432_000);
    expect(slots[0]).toBe(0);
    expect(slots[431_999]).toBe(431_999);
    expect(slots.every((s, i) => s === i)).toBe(true);
    expect((await t.rpc('getLeaderSchedule', [432_000])).result[identity]).toHaveLength(432_000);
    expect((await t.rpc('getLeaderSchedule', [864_000])).result).toBeNull();
    expect((await t.rpc('getLeaderSchedule', [null, { identity: Keypair.generate().publicKey.toBase58() }])).result).toEqual({});
    expect((await t.rpc('getLeaderSchedule', [{ identity: Keypair.generate().publicKey.toBase58(), commitment: 'confirmed' }])).result).toEqual({});
    expect((await t.rpc('getLeaderSchedule', [null, { identity: 'not-a-key' }])).error).toEqual({ code: -32602, message: 'Invalid param: Invalid' });
    expect((await t.rpc('getLeaderSchedule', ['x'])).error?.code).toBe(-32602);
  });

  it('counts every slot of the epoch so far as a leader slot with its block produced', async () => {
    const before = await t.conn.getSlot('finalized');
    const { context, value } = await t.conn.getBlockProduction('finalized');
    expect(value.range).toEqual({ firstSlot: 0, lastSlot: context.slot });
    expect(context.slot).toBeGreaterThanOrEqual(before);
    expect(context.slot).toBeLessThan(await t.conn.getSlot('confirmed'));
    const n = context.slot + 1;
    expect(value.byIdentity).toEqual({ [identity]: [n, n] });
    const ranged = await t.conn.getBlockProduction({ range: { firstSlot: 2, lastSlot: 4 }, commitment: 'confirmed' });
    expect(ranged.value.byIdentity).toEqual({ [identity]: [3, 3] });
    const other = await t.rpc('getBlockProduction', [{ identity: Keypair.generate().publicKey.toBase58() }]);
    expect(other.result.value.byIdentity).toEqual({});
  });

  it('refuses block production ranges as agave words it', async () => {
    expect((await t.rpc('getBlockProduction', [{ range: { firstSlot: 5, lastSlot: 3 } }])).error).toEqual({
      code: -32602,
      message: 'lastSlot, 3, cannot be less than firstSlot, 5',
    });
    const res = await t.rpc('getBlockProduction', [{ range: { firstSlot: 0, lastSlot: 10_000_000 } }]);
    expect(res.error?.message).toMatch(/^lastSlot, 10000000, is too large; max \d+$/);
    expect((await t.rpc('getBlockProduction', [{ range: { lastSlot: 3 } }])).error?.message).toBe('Invalid params: missing field `firstSlot`.');
  });

  it('has no commitment entry for any block: no stake votes, as getVoteAccounts says', async () => {
    const finalized = await t.conn.getSlot('finalized');
    for (const slot of [0, finalized, finalized + 1_000]) {
      expect((await t.rpc('getBlockCommitment', [slot])).result).toEqual({ commitment: null, totalStake: 0 });
    }
    const votes = await t.conn.getVoteAccounts();
    expect([...votes.current, ...votes.delinquent].reduce((sum, v) => sum + v.activatedStake, 0)).toBe(0);
    expect((await t.rpc('getBlockCommitment', ['x'])).error).toEqual({ code: -32602, message: 'Invalid params: invalid type: string "x", expected u64.' });
    expect((await t.rpc('getBlockCommitment', [])).error).toEqual({ code: -32602, message: 'Invalid params: invalid length 0, expected a tuple of size 1.' });
  });

  it("quotes mainnet's minimum stake delegation of 1 SOL", async () => {
    const { context, value } = await t.conn.getStakeMinimumDelegation({ commitment: 'confirmed' });
    expect(value).toBe(LAMPORTS_PER_SOL);
    expect(context.slot).toBeGreaterThan(0);
    const ahead = await t.rpc('getStakeMinimumDelegation', [{ minContextSlot: 1e9 }]);
    expect(ahead.error?.code).toBe(-32016);
  });

  it('samples its slot production and counts the rooted transactions', async () => {
    const payer = await t.funded(1);
    const airdrops = 2; // the funding airdrop and this one
    await t.conn.requestAirdrop(payer.publicKey, 1);
    await new Promise((r) => setTimeout(r, 3_500));
    const samples = await t.conn.getRecentPerformanceSamples(720);
    expect(samples.length).toBeGreaterThanOrEqual(2);
    for (const s of samples) expect(s.samplePeriodSecs).toBeGreaterThanOrEqual(1);
    // newest first, each one starting where the one before it ended
    for (let i = 0; i + 1 < samples.length; i++) expect(samples[i]!.slot - samples[i]!.numSlots).toBe(samples[i + 1]!.slot);
    const oldest = samples[samples.length - 1]!;
    const slots = samples.reduce((sum, s) => sum + s.numSlots, 0);
    expect(samples[0]!.slot - (oldest.slot - oldest.numSlots)).toBe(slots);
    const raw = (await t.rpc('getRecentPerformanceSamples', [])).result;
    expect(raw.reduce((sum: number, s: { numTransactions: number }) => sum + s.numTransactions, 0)).toBeGreaterThanOrEqual(airdrops);
    expect(raw.every((s: { numTransactions: number; numNonVoteTransactions: number }) => s.numTransactions === s.numNonVoteTransactions)).toBe(true);
    expect(await t.conn.getRecentPerformanceSamples(1)).toHaveLength(1);
    expect((await t.rpc('getRecentPerformanceSamples', [721])).error).toEqual({ code: -32602, message: 'Invalid limit; max 720' });
  });

  it('answers odd params of the new methods with a result or a validation error, never an internal error', async () => {
    const methods = ['getClusterNodes', 'getLeaderSchedule', 'getBlockProduction', 'getBlockCommitment', 'getRecentPerformanceSamples'];
    methods.push('getInflationGovernor', 'getInflationRate', 'getInflationReward', 'getStakeMinimumDelegation');
    const odd: unknown[] = [[null], [{}], [1, 2, 3], { a: 1 }, [[]], ['x', 'y'], [true, { commitment: 5 }], [-1], [[1], { epoch: 'x' }], [{ range: 5 }]];
    for (const method of methods) {
      for (const params of odd) {
        const res = await t.rpc(method, params);
        expect('result' in res || res.error?.code !== undefined, method).toBe(true);
        expect(res.error?.code, `${method} ${JSON.stringify(params)}: ${res.error?.message}`).not.toBe(-32603);
      }
    }
  });
});
