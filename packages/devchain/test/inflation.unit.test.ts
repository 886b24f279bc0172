import { Keypair } from '@solana/web3.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAUCET } from '../src/index.ts';
import { startTestChain } from './helpers.ts';
import type { TestChain } from './helpers.ts';

// Short epochs (agave's minimum, 32 slots) and fast slots, so later epochs come within the test.
let t: TestChain;
const identity = FAUCET.publicKey.toBase58();

beforeAll(async () => {
  t = await startTestChain({ slotMs: 10, slotsPerEpoch: 32 });
});
afterAll(async () => {
  await t.close();
});

async function untilEpoch(epoch: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while ((await t.conn.getEpochInfo('finalized')).epoch < epoch) {
    if (Date.now() > deadline) throw new Error(`epoch ${epoch} never came`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('inflation, through JSON-RPC and web3.js', () => {
  it("answers mainnet's inflation governor, written as serde writes floats", async () => {
    expect(await t.conn.getInflationGovernor()).toEqual({ initial: 0.08, terminal: 0.015, taper: 0.15, foundation: 0, foundationTerm: 0 });
    const text = await (
      await fetch(t.chain.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":1,"method":"getInflationGovernor"}',
      })
    ).text();
    expect(text).toBe('{"jsonrpc":"2.0","id":1,"result":{"initial":0.08,"terminal":0.015,"taper":0.15,"foundation":0.0,"foundationTerm":0.0}}');
    expect((await t.rpc('getInflationGovernor', [{ commitment: 'sometime' }])).error?.code).toBe(-32602);
  });

  it("gives the rate of the root's epoch, tapering from 8% with devchain's slots as the clock", async () => {
    await untilEpoch(2);
    const rate = await t.conn.getInflationRate();
    const epoch = (await t.conn.getEpochInfo('finalized')).epoch;
    expect([epoch, epoch - 1]).toContain(rate.epoch);
    // years since genesis at the epoch's first slot, a slot being slotMs long
    const years = (rate.epoch * 32 * 0.01) / (365.242199 * 86_400);
    expect(rate.total).toBeCloseTo(0.08 * 0.85 ** years, 15);
    expect(rate.total).toBeLessThan(0.08);
    expect(rate.validator).toBe(rate.total);
    expect(rate.foundation).toBe(0);
    expect((await t.rpc('getInflationRate', [{}])).error).toEqual({ code: -32602, message: 'Invalid parameters: No parameters were expected' });
  });

  it('has no reward for any address (no stake), for the last epoch by default and for any ended one', async () => {
    await untilEpoch(2);
    const someone = await t.funded(1);
    const addresses = [someone.publicKey, FAUCET.publicKey, Keypair.generate().publicKey];
    expect(await t.conn.getInflationReward(addresses)).toEqual([null, null, null]);
    expect(await t.conn.getInflationReward(addresses, 0)).toEqual([null, null, null]);
    const res = await t.rpc('getInflationReward', [[identity], { epoch: 1, commitment: 'confirmed' }]);
    expect(res.result).toEqual([null]);
  });

  it('cannot read rewards of an epoch whose boundary block is not there yet: -32004', async () => {
    const { epoch } = await t.conn.getEpochInfo('finalized');
    const res = await t.rpc('getInflationReward', [[identity], { epoch: epoch + 5 }]);
    expect(res.error).toEqual({ code: -32004, message: `Block not available for slot ${(epoch + 6) * 32}` });
    await expect(t.conn.getInflationReward([FAUCET.publicKey], epoch + 5)).rejects.toThrow(/Block not available/);
  });

  it('validates addresses and config as agave does', async () => {
    const many = Array.from({ length: 33 }, () => Keypair.generate().publicKey.toBase58());
    expect((await t.rpc('getInflationReward', [many])).error).toEqual({ code: -32602, message: 'Too many inputs provided; max 32' });
    expect((await t.rpc('getInflationReward', [['nope!']])).error).toEqual({ code: -32602, message: 'Invalid param: Invalid' });
    expect((await t.rpc('getInflationReward', [])).error?.code).toBe(-32602);
    expect((await t.rpc('getInflationReward', ['x'])).error?.message).toBe('Invalid params: invalid type: string "x", expected a sequence.');
    expect((await t.rpc('getInflationReward', [[identity], { epoch: -1 }])).error?.message).toBe('Invalid params: invalid value: integer `-1`, expected u64.');
    expect((await t.rpc('getInflationReward', [[identity], { commitment: 'processed' }])).error?.code).toBe(-32602);
    expect((await t.rpc('getInflationReward', [[identity], { minContextSlot: 1e9 }])).error?.code).toBe(-32016);
  });

  it("names devchain's identity for each of the epoch's slots in web3.js's getLeaderSchedule", async () => {
    const schedule = await t.conn.getLeaderSchedule();
    expect(schedule).toEqual({ [identity]: Array.from({ length: 32 }, (_, i) => i) });
    const { epoch } = await t.conn.getEpochInfo('finalized');
    // the next epoch's schedule is known, the one after it not yet
    expect((await t.rpc('getLeaderSchedule', [(epoch + 1) * 32])).result).toEqual(schedule);
    expect((await t.rpc('getLeaderSchedule', [(epoch + 3) * 32])).result).toBeNull();
  });

  it('counts block production from the first slot of the current epoch', async () => {
    const { context, value } = await t.conn.getBlockProduction('finalized');
    const first = Math.floor(context.slot / 32) * 32;
    expect(value.range).toEqual({ firstSlot: first, lastSlot: context.slot });
    expect(value.byIdentity[identity]).toEqual([context.slot - first + 1, context.slot - first + 1]);
  });
});
